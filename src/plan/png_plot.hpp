// A small PNG line chart for `trident plan --plot`: predicted throughput against the number of
// devices, with the points where scaling turns negative in red. We draw the raster (lines, dots,
// digits for the axis labels from a built-in 3x5 font); libpng writes the file.
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
