// SPDX-License-Identifier: Apache-2.0
// kiln_null_server [PORT] [THREADS] [--grpc]: runs NullServer (null_server.h), or with --grpc
// GrpcNullServer (grpc_null_server.h), until killed and prints "listening on PORT" first. For
// measuring `kiln bench` itself and the protocol floor kiln's added latency is counted from:
//   build/src/bench/kiln_null_server 0 1 &          # prints the port
//   build/kiln bench -m add_sub -u 127.0.0.1:PORT --concurrency-range 16
//   build/src/bench/kiln_null_server 0 2 --grpc &
//   build/kiln bench -m add_sub -u 127.0.0.1:PORT -i grpc --concurrency-range 1

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "bench/null_server.h"
#ifdef KILN_HAVE_GRPC
#include "bench/grpc_null_server.h"
#endif

namespace {

template <typename Server>
int Serve(kiln::Result<std::unique_ptr<Server>> server) {
  if (!server.ok()) {
    std::fprintf(stderr, "kiln_null_server: %s\n", server.status().message().c_str());
    return 1;
  }
  std::printf("listening on %d\n", (*server)->port());
  std::fflush(stdout);
  while (true) ::pause();
}

}  // namespace

int main(int argc, char** argv) {
  int numbers[2] = {0, 1};  // port, threads
  int seen = 0;
  bool grpc = false;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--grpc") == 0) {
      grpc = true;
    } else if (seen < 2) {
      numbers[seen++] = std::atoi(argv[i]);
    } else {
      std::fprintf(stderr, "usage: kiln_null_server [PORT] [THREADS] [--grpc]\n");
      return 2;
    }
  }
  if (grpc) {
#ifdef KILN_HAVE_GRPC
    return Serve(kiln::bench::GrpcNullServer::Start(numbers[0], numbers[1]));
#else
    std::fprintf(stderr, "kiln_null_server: built without gRPC\n");
    return 1;
#endif
  }
  return Serve(kiln::bench::NullServer::Start(numbers[0], numbers[1]));
}
