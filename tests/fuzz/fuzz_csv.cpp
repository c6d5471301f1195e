// libFuzzer target: the CSV reader (engine/data/csv.cpp), from memory. The first byte picks
// the options: header or not, the delimiter, the label column (none, by position, by name,
// with or without class names) and the feature dtype.
#include "data/csv.h"
#include "fuzz_common.h"

namespace {

tpu::CsvOptions options_from(uint8_t b) {
  tpu::CsvOptions o;
  o.header = (b & 1) == 0;
  o.delimiter = ",;\t|"[(b >> 1) & 3];
  switch ((b >> 3) & 3) {
    case 1: o.label = tpu::CsvColumn{"", 1}; break;
    case 2: o.label = tpu::CsvColumn{o.header ? "label" : "", o.header ? 0 : 2}; break;
    case 3: o.label = tpu::CsvColumn{"", -1}; break;
    default: break;
  }
  if (b & 0x20) o.label_classes = {"a", "b", "c"};
  o.feature_dtype = (b & 0x40) ? tpu::DType::i32 : tpu::DType::f32;
  if (b & 0x80) o.features = {tpu::CsvColumn{"", 1}, tpu::CsvColumn{o.header ? "x" : "", o.header ? 0 : 3}};
  return o;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  tpu::CsvOptions o = options_from(data[0]);
  fuzz::expect_only_tpu_errors([&] { tpu::parse_csv(fuzz::text(data + 1, size - 1), "fuzz.csv", o); });
  return 0;
}
