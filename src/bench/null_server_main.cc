// SPDX-License-Identifier: Apache-2.0
// kiln_null_server [PORT] [THREADS]: runs NullServer (null_server.h) until killed and prints
// "listening on PORT" first. For measuring `kiln bench` itself:
//   build/src/bench/kiln_null_server 0 1 &   # prints the port
//   build/kiln bench -m add_sub -u 127.0.0.1:PORT --concurrency-range 16

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

#include "bench/null_server.h"

int main(int argc, char** argv) {
  int port = argc > 1 ? std::atoi(argv[1]) : 0;
  int threads = argc > 2 ? std::atoi(argv[2]) : 1;
  auto server = kiln::bench::NullServer::Start(port, threads);
  if (!server.ok()) {
    std::fprintf(stderr, "kiln_null_server: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("listening on %d\n", (*server)->port());
  std::fflush(stdout);
  while (true) ::pause();
}
