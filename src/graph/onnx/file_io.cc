// SPDX-License-Identifier: Apache-2.0
// Whole-file I/O with POSIX calls (file_io.h).

#include "graph/onnx/file_io.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <system_error>

namespace kiln::onnx_internal {
namespace {

Status FileError(std::string_view verb, std::string_view kind, const std::string& path, int err) {
  std::string msg =
      fmt::format("cannot {} {} '{}': {}", verb, kind, path, std::generic_category().message(err));
  return err == ENOENT ? Status::NotFound(std::move(msg)) : Status::InvalidArgument(std::move(msg));
}

// Closes `fd` on every path out of the caller.
class FdCloser {
 public:
  explicit FdCloser(int fd) : fd_(fd) {}
  ~FdCloser() {
    if (fd_ >= 0) ::close(fd_);
  }
  FdCloser(const FdCloser&) = delete;
  FdCloser& operator=(const FdCloser&) = delete;
  // Closes now and returns close()'s errno (0 on success).
  int Close() {
    const int rc = ::close(fd_);
    fd_ = -1;
    return rc == 0 ? 0 : errno;
  }

 private:
  int fd_;
};

}  // namespace

Result<std::string> ReadWholeFile(const std::string& path, std::string_view kind) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return FileError("read", kind, path, errno);
  FdCloser closer(fd);
  struct stat st;
  if (::fstat(fd, &st) != 0) return FileError("read", kind, path, errno);
  if (S_ISDIR(st.st_mode)) return FileError("read", kind, path, EISDIR);
  // Read straight into a buffer of the file's size; past that (a file that grew, or a pipe),
  // append in chunks.
  std::string out(S_ISREG(st.st_mode) ? static_cast<size_t>(st.st_size) : 0, '\0');
  size_t len = 0;
  char chunk[1 << 14];
  while (true) {
    const bool in_place = len < out.size();
    char* dst = in_place ? out.data() + len : chunk;
    const size_t room = in_place ? out.size() - len : sizeof(chunk);
    const ssize_t n = ::read(fd, dst, room);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileError("read", kind, path, errno);
    }
    if (n == 0) break;
    if (in_place) {
      len += static_cast<size_t>(n);
    } else {
      out.resize(len);
      out.append(chunk, static_cast<size_t>(n));
      len = out.size();
    }
  }
  out.resize(len);
  return out;
}

Status WriteWholeFile(const std::string& path, std::string_view bytes, std::string_view kind) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return FileError("write", kind, path, errno);
  FdCloser closer(fd);
  size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return FileError("write", kind, path, errno);
    }
    done += static_cast<size_t>(n);
  }
  if (const int err = closer.Close(); err != 0) return FileError("write", kind, path, err);
  return Status::OK();
}

}  // namespace kiln::onnx_internal
