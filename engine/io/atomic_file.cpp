#include "io/atomic_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <functional>
#include <utility>

#include "core/error.h"

namespace tpu {

namespace {

std::atomic<uint64_t> temp_counter{0};

std::string directory_of(const std::string& path) {
  std::string dir = std::filesystem::path(path).parent_path().string();
  return dir.empty() ? "." : dir;
}

// This host's name, as a part of file names.
const std::string& host_name() {
  static const std::string name = [] {
    char buf[256] = {};
    if (::gethostname(buf, sizeof buf - 1) != 0 || !buf[0]) return std::string("host");
    std::string s = buf;
    for (char& c : s)
      if (c == '/') c = '_';
    return s;
  }();
  return name;
}

// ".ckpt.safetensors.tmp-": every temporary name of `path` starts so.
std::string temp_prefix(const std::string& path) {
  return "." + std::filesystem::path(path).filename().string() + ".tmp-";
}

// "<dir>/.<name>.tmp-<host>-<pid>-<n>": the host and PID say whose file it is.
std::string temp_name(const std::string& path) {
  std::string base =
      temp_prefix(path) + host_name() + "-" + std::to_string(::getpid()) + "-" + std::to_string(temp_counter++);
  return (std::filesystem::path(path).parent_path() / base).string();
}

bool all_digits(std::string_view s) {
  return !s.empty() && s.size() < 10 && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The writer's PID when `rest` (a temporary name after its prefix) is "<host>-<pid>-<n>" of this
// host, or "<pid>-<n>" (the names of earlier versions); else 0.
pid_t temp_writer(std::string_view rest) {
  const size_t n_at = rest.rfind('-');
  if (n_at == std::string_view::npos || !all_digits(rest.substr(n_at + 1))) return 0;
  const size_t pid_end = n_at;
  const size_t dash = rest.substr(0, pid_end).rfind('-');
  const size_t pid_at = dash == std::string_view::npos ? 0 : dash + 1;
  const std::string_view host = pid_at == 0 ? "" : rest.substr(0, pid_at - 1);
  const std::string_view pid = rest.substr(pid_at, pid_end - pid_at);
  if (!all_digits(pid) || (pid_at != 0 && host != host_name())) return 0;
  return pid_t(std::stol(std::string(pid)));
}

// Removes the temporary files of `path` whose writers died (killed during a save): they would
// pile up. A file of a live process (another rank saving) or of another host stays.
void remove_stale_temps(const std::string& path) {
  const std::string prefix = temp_prefix(path);
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(directory_of(path), ec)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(prefix)) continue;
    const pid_t pid = temp_writer(std::string_view(name).substr(prefix.size()));
    if (pid > 0 && pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH) ::unlink(entry.path().c_str());
  }
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

// The file a save to `path` replaces: `path` itself, or what it links to when it is a symbolic
// link (renaming over the link would replace the link, leaving its target with the old data).
// A dangling link gives the file it names; a cycle of links (40 hops, as the kernel's limit)
// throws `loop`, since renaming over one link of the cycle would quietly break it.
std::string resolve_links(const std::string& path, const std::function<void()>& loop) {
  namespace fs = std::filesystem;
  fs::path p = path;
  std::error_code ec;
  for (int hops = 0; fs::is_symlink(fs::symlink_status(p, ec)); ++hops) {
    if (hops == 40) loop();
    fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  return p.string();
}

}  // namespace

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  std::error_code ec;
  if (path_.empty()) throw Error("cannot write a file with an empty name");
  if (std::filesystem::is_directory(path_, ec)) fail("it is a directory", 0);
  target_ = resolve_links(path_, [this] { fail("its symbolic links form a cycle", ELOOP); });
  remove_stale_temps(target_);
  for (int attempt = 0; fd_ < 0; ++attempt) {
    temp_ = temp_name(target_);
    fd_ = ::open(temp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ < 0 && (errno != EEXIST || attempt == 100)) {
      fail(create_reason(directory_of(target_), errno), 0);
    }
  }
  keep_mode();
}

// The new file gets the permissions of the one it replaces (a private 0600 file stays private);
// a new file gets 0666 less the umask, as open() gave it. Best effort: file systems without
// permissions (some network and FUSE mounts) refuse fchmod, and the save goes on without it.
void AtomicFile::keep_mode() {
  struct stat st {};
  if (::stat(target_.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) return;
  (void)::fchmod(fd_, st.st_mode & 07777);
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
  if (::rename(temp_.c_str(), target_.c_str()) != 0) fail("rename failed", errno);
  committed_ = true;
  if (int err = sync_directory(directory_of(target_))) fail("fsync of the directory failed", err);
}

void write_file_atomic(const std::string& path, std::string_view content) {
  AtomicFile f(path);
  f.write(content);
  f.commit();
}

}  // namespace tpu
