// libFuzzer target: the IDX reader (engine/data/idx.cpp), which reads paths. The first byte
// picks how the rest reaches it: 0 a plain file, 1 the same bytes named ".gz" (corrupt gzip
// handling), 2 gzip-compressed (the decompressing reader on well-formed streams).
#include <zlib.h>

#include <cstdio>

#include "data/idx.h"
#include "fuzz_common.h"

namespace {

void write_plain(const std::string& path, std::string_view bytes) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) fuzz::finding("cannot write " + path);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

void write_gzip(const std::string& path, std::string_view bytes) {
  gzFile f = gzopen(path.c_str(), "wb1");
  if (!f) fuzz::finding("cannot write " + path);
  if (!bytes.empty()) gzwrite(f, bytes.data(), unsigned(bytes.size()));
  gzclose(f);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  std::string_view rest = fuzz::text(data + 1, size - 1);
  const int mode = data[0] % 3;
  const std::string path = fuzz::scratch_path(mode == 0 ? ".idx" : ".idx.gz");
  if (mode == 2) write_gzip(path, rest);
  else write_plain(path, rest);
  fuzz::expect_only_tpu_errors([&] { tpu::read_idx(path); });
  std::remove(path.c_str());
  return 0;
}
