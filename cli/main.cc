#include <iostream>

#include "cli/cli.h"

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return lockstep::cli::run_cli(args, std::cout, std::cerr);
}
