// Reading numeric CSV files into a feature matrix and an optional label vector.
//
//   tpu::CsvOptions o;
//   o.label = tpu::CsvColumn{"species"};
//   o.label_classes = {"setosa", "versicolor", "virginica"};
//   tpu::CsvData d = tpu::read_csv("iris.csv", o);   // d.features f32[150,4], d.labels i32[150]
//
// The format is RFC 4180: fields separated by the delimiter, records by "\n" or "\r\n",
// fields may be quoted ("a ""b"", c" holds a comma and quotes, and may span lines). A UTF-8
// byte order mark is skipped and empty lines are ignored. Parsing is strict: every record has
// as many fields as the first (the header), a selected field must hold a finite number
// (spaces around it are allowed; an i32 column needs an integer), and a label given by name
// must be one of label_classes. Every defect throws tpu::Error whose message starts with
// "path:line:column: " (column counts characters from 1) and echoes the offending text.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace tpu {

// A column chosen by its header name, or (when name is empty) by 1-based position.
struct CsvColumn {
  std::string name;
  int64_t position = 0;
};

struct CsvOptions {
  char delimiter = ',';
  bool header = true;                      // the first record names the columns
  std::vector<CsvColumn> features;         // empty: every column except the label
  DType feature_dtype = DType::f32;        // f32 or i32
  std::optional<CsvColumn> label;
  DType label_dtype = DType::i32;          // f32 or i32; ignored with label_classes
  std::vector<std::string> label_classes;  // label texts -> 0-based class ids (i32)
};

struct CsvData {
  Tensor features;                         // [records, features]
  std::optional<Tensor> labels;            // [records]
  std::vector<std::string> feature_names;  // from the header, or "column N"
};

// A path ending in ".gz" is decompressed (as IDX files are).
CsvData read_csv(const std::string& path, const CsvOptions& options);

// The same from text in memory; `name` stands for the path in messages.
CsvData parse_csv(std::string_view text, const std::string& name, const CsvOptions& options);

}  // namespace tpu
