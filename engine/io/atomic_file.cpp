#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <utility>

#include "core/error.h"

namespace tpu {

namespace {

std::atomic<uint64_t> temp_counter{0};

std::string directory_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

std::string temp_name(const std::string& path) {
  std::filesystem::path p(path);
  std::string base = "." + p.filename().string() + ".tmp-" + std::to_string(::getpid()) + "-" +
                     std::to_string(temp_counter++);
  return (p.parent_path() / base).string();
}

// The reason a file in `dir` could not be created, for the user.
std::string create_reason(const std::string& dir, int err) {
  std::error_code ec;
  if (err == ENOENT && !std::filesystem::exists(dir, ec)) return "the directory " + dir + " does not exist";
  if (err == ENOTDIR) return dir + " is not a directory";
  return std::strerror(err);
}

// fsync of the directory makes the rename itself durable. Some file systems cannot sync a
// directory (EINVAL); the rename has happened anyway.
int sync_directory(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return errno;
  int err = ::fsync(fd) == 0 || errno == EINVAL ? 0 : errno;
  ::close(fd);
  return err;
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.empty()) throw Error("cannot write a file with an empty name");
  if (std::filesystem::is_directory(path_, ec)) fail("it is a directory", 0);
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = temp_name(path_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100)) {
      fail(create_reason(directory_of(path_), errno), 0);
    }
  }
}

AtomicFile::~AtomicFile() { discard(); }

void AtomicFile::discard() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (!committed_ && !temp_.empty()) ::unlink(temp_.c_str());
  temp_.clear();
}

void AtomicFile::fail(const std::string& what, int err) const {
  std::string reason = err ? what + ": " + std::strerror(err) : what;
  throw Error("cannot write " + path_ + ": " + reason);
}

void AtomicFile::write(std::span<const std::byte> data) {
  if (fd_ < 0) fail("the file is already closed", 0);
  while (!data.empty()) {
    ssize_t n = ::write(fd_, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) fail("write failed", errno);
    data = data.subspan(size_t(n));
  }
}

void AtomicFile::commit() {
  if (fd_ < 0) fail("the file is already closed", 0);
  if (::fsync(fd_) != 0) fail("fsync failed", errno);
  int fd = std::exchange(fd_, -1);
  if (::close(fd) != 0) fail("close failed", errno);
  if (::rename(temp_.c_str(), path_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  if (int err = sync_directory(directory_of(path_))) fail("fsync of the directory failed", err);
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

}  // namespace tpu
