// The program's version, shown by --version, written into resolved decks and output files.
#pragma once

#define TRIDENT_VERSION "0.1.0"
