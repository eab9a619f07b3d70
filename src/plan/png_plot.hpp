// A small PNG line chart for `trident plan --plot`: predicted throughput against the number of
// devices, with the points where scaling turns negative in red. Written without a plotting or
// image library (stored deflate blocks, CRC-32 and Adler-32 by hand), so the project needs no
// new package; digits for the axis labels come from a built-in 3x5 font.
#pragma once

#include <string>
#include <vector>

namespace trident::plan {

struct PlotPoint {
  double devices = 0;     // x, on a log2 axis
  double throughput = 0;  // y, tokens/s (0: nothing fits, not drawn)
  bool negative = false;  // slower than a smaller device count: drawn red
};

// The PNG file's bytes.
std::string scaling_plot_png(const std::vector<PlotPoint>& points, int width = 640, int height = 400);

}  // namespace trident::plan
