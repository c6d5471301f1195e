// Writing a file so that a crash at any moment leaves either the previous file or the complete
// new one, never a mixture.
//
//   tpu::AtomicFile out("run/ckpt.safetensors");  // creates run/.ckpt.safetensors.tmp-<host>-<pid>-<n>
//   out.write(header);
//   out.write(data);
//   out.commit();  // fsync the data, rename over the target, fsync the directory
//
// The temporary file lives in the target's directory (a rename is atomic only within one file
// system; when the path is a symbolic link, the directory of the file it links to, and the link
// stays a link), gets the permissions of the file it replaces, and is removed when the object
// dies uncommitted (an exception on the way). A process killed with SIGKILL leaves its temporary file behind, the target untouched; the next
// AtomicFile of that path removes it (the host and PID in the name show its writer is dead). Every failure
// throws tpu::Error naming the target path and the system's reason.
#pragma once
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace tpu {

class AtomicFile {
 public:
  explicit AtomicFile(std::string path);
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  ~AtomicFile();

  void write(std::span<const std::byte> data);
  void write(std::string_view text) { write(std::as_bytes(std::span(text.data(), text.size()))); }
  void commit();

  const std::string& temp_path() const { return temp_; }

 private:
  [[noreturn]] void fail(const std::string& what, int err) const;
  void discard();
  void keep_mode();

  std::string path_;
  std::string target_;  // path_ with symbolic links followed: the file the rename replaces
  std::string temp_;
  int fd_ = -1;
  bool committed_ = false;
};

// The whole content at once.
void write_file_atomic(const std::string& path, std::string_view content);

}  // namespace tpu
