#include "data/csv.h"

#include <clocale>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <unordered_map>

#include "core/error.h"
#include "data/byte_source.h"

namespace tpu {

namespace {

struct Field {
  std::string text;
  int64_t line = 0, column = 0;
};
using Record = std::vector<Field>;

struct Place {
  int64_t line = 0, column = 0;
};

[[noreturn]] void fail_at(const std::string& name, Place at, const std::string& what) {
  throw Error(name + ":" + std::to_string(at.line) + ":" + std::to_string(at.column) + ": " + what);
}

std::string show_text(std::string_view s) {
  constexpr size_t kMax = 40;
  std::string out = "\"";
  for (char c : s.substr(0, kMax)) out += c == '\n' ? std::string("\\n") : c == '\r' ? std::string("\\r") : std::string(1, c);
  return out + (s.size() > kMax ? "...\"" : "\"");
}

// ---- records: RFC 4180 fields with line and column numbers ----

class Tokenizer {
 public:
  Tokenizer(std::string_view text, const std::string& name, char delimiter)
      : s_(text), name_(name), delim_(delimiter) {
    if (s_.starts_with("\xEF\xBB\xBF")) s_.remove_prefix(3);
  }

  // Reads the next non-empty record into r; `end` is where it ends. False at the end of input.
  bool next(Record& r, Place& end) {
    while (!at_end() && at_newline()) skip_newline();
    if (at_end()) return false;
    r.clear();
    while (true) {
      Field& f = r.emplace_back();
      f.line = line_;
      f.column = col_;
      if (peek() == '"') quoted_field(f);
      else plain_field(f);
      if (at_end() || peek() != delim_) break;
      advance();
    }
    end = here();
    if (!at_end()) skip_newline();
    return true;
  }

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  bool at_newline() const { return peek() == '\n' || s_.substr(pos_).starts_with("\r\n"); }
  Place here() const { return {line_, col_}; }
  void skip_newline() {
    if (peek() == '\r') advance();
    advance();
  }
  // Moves past one byte; columns count characters, so UTF-8 continuation bytes add none.
  void advance() {
    if (s_[pos_++] == '\n') {
      ++line_;
      col_ = 1;
    } else if (at_end() || (uint8_t(s_[pos_]) & 0xC0) != 0x80) {
      ++col_;
    }
  }
  void check_byte() const {
    if (peek() == '\0' && !at_end()) fail_at(name_, here(), "a NUL byte: this is binary data, not CSV text");
  }
  void plain_field(Field& f) {
    while (!at_end() && peek() != delim_ && !at_newline()) {
      check_byte();
      if (peek() == '"')
        fail_at(name_, here(), "a quote inside an unquoted field " + show_text(f.text + "\"") +
                                   "; quote the whole field and double the quotes inside (\"a \"\"b\"\"\")");
      f.text += peek();
      advance();
    }
  }
  void quoted_field(Field& f) {
    const Place open = here();
    advance();
    while (true) {
      if (at_end()) fail_at(name_, open, "unterminated quoted field: the quote opened here is never closed");
      check_byte();
      char c = peek();
      advance();
      if (c != '"') {
        f.text += c;
      } else if (peek() == '"') {
        f.text += '"';
        advance();
      } else {
        break;
      }
    }
    if (!at_end() && peek() != delim_ && !at_newline())
      fail_at(name_, here(), std::string("unexpected character ") + show_text(std::string(1, peek())) +
                                 " after the closing quote of a quoted field");
  }

  std::string_view s_;
  const std::string& name_;
  char delim_;
  size_t pos_ = 0;
  int64_t line_ = 1, col_ = 1;
};

// ---- choosing columns ----

struct Plan {
  std::vector<std::string> names;  // of every column
  std::vector<size_t> features;    // 0-based
  std::optional<size_t> label;
};

std::string column_str(const Plan& p, size_t i) {
  return "column " + std::to_string(i + 1) + " (" + show_text(p.names[i]) + ")";
}

size_t find_name(const std::string& want, const std::vector<std::string>& names, const std::string& name) {
  std::optional<size_t> found;
  std::string all;
  for (size_t i = 0; i < names.size(); ++i) {
    all += (i ? ", " : "") + show_text(names[i]);
    if (names[i] != want) continue;
    if (found)
      throw Error(name + ": the header names column " + show_text(want) + " twice (columns " +
                  std::to_string(*found + 1) + " and " + std::to_string(i + 1) + ")");
    found = i;
  }
  if (!found) throw Error(name + ": no column named " + show_text(want) + " in the header (columns: " + all + ")");
  return *found;
}

size_t resolve(const CsvColumn& c, const std::vector<std::string>& names, bool header, const std::string& name) {
  if (!c.name.empty()) {
    if (!header) throw Error(name + ": column " + show_text(c.name) + " is chosen by name, but the file has no header row");
    return find_name(c.name, names, name);
  }
  if (c.position < 1 || size_t(c.position) > names.size())
    throw Error(name + ": there is no column " + std::to_string(c.position) + "; the file has " +
                std::to_string(names.size()) + " columns (numbered from 1)");
  return size_t(c.position - 1);
}

Plan make_plan(const CsvOptions& o, std::vector<std::string> names, const std::string& name) {
  Plan p{std::move(names), {}, std::nullopt};
  if (o.label) p.label = resolve(*o.label, p.names, o.header, name);
  for (const CsvColumn& c : o.features) {
    size_t i = resolve(c, p.names, o.header, name);
    if (i == p.label) throw Error(name + ": " + column_str(p, i) + " is both a feature and the label");
    p.features.push_back(i);
  }
  if (o.features.empty())
    for (size_t i = 0; i < p.names.size(); ++i)
      if (i != p.label) p.features.push_back(i);
  return p;
}

std::vector<std::string> column_names(const Record& first, bool header) {
  std::vector<std::string> names;
  for (size_t i = 0; i < first.size(); ++i) names.push_back(header ? first[i].text : "column " + std::to_string(i + 1));
  return names;
}

// ---- values ----

std::string_view trimmed(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// std::from_chars, except that a float too small for f32 reads as the nearest f32 (0 or a
// denormal), as numpy and pandas read it: only a value too large is out of range.
template <class T>
std::from_chars_result read_number(std::string_view s, T& v) {
  std::from_chars_result r = std::from_chars(s.data(), s.data() + s.size(), v);
  if constexpr (std::is_same_v<T, float>) {
    if (r.ec != std::errc::result_out_of_range) return r;
    // from_chars does not say which way the value left the range; strtof (in the "C" locale,
    // whose decimal point is '.') does, on the text from_chars matched.
    static const locale_t c_locale = ::newlocale(LC_ALL_MASK, "C", locale_t(0));
    const float x = ::strtof_l(std::string(s.data(), r.ptr).c_str(), nullptr, c_locale);
    if (std::isinf(x)) return r;
    v = x;
    r.ec = std::errc();
  }
  return r;
}

template <class T>
T parse_number(const Field& f, const Plan& p, size_t col, const std::string& name) {
  std::string_view s = trimmed(f.text);
  const char* what = std::is_same_v<T, float> ? "a number" : "an integer";
  if (s.empty()) fail_at(name, {f.line, f.column}, column_str(p, col) + ": empty field (expected " + what + ")");
  // One leading '+' is a sign, as numpy and pandas read it (from_chars takes only '-').
  if (s.size() > 1 && s[0] == '+' && s[1] != '-' && s[1] != '+') s.remove_prefix(1);
  T v{};
  auto [end, ec] = read_number(s, v);
  if (ec == std::errc::result_out_of_range)
    fail_at(name, {f.line, f.column}, column_str(p, col) + ": " + show_text(f.text) + " is out of the " +
                                          (std::is_same_v<T, float> ? "f32" : "i32") + " range");
  bool ok = ec == std::errc() && end == s.data() + s.size();
  if constexpr (std::is_same_v<T, float>) ok = ok && std::isfinite(v);
  if (!ok) fail_at(name, {f.line, f.column}, column_str(p, col) + ": expected " + what + ", got " + show_text(f.text));
  return v;
}

class LabelReader {
 public:
  explicit LabelReader(const CsvOptions& o) : dtype_(o.label_classes.empty() ? o.label_dtype : DType::i32) {
    for (size_t i = 0; i < o.label_classes.size(); ++i) {
      ids_.emplace(o.label_classes[i], int32_t(i));
      classes_ += (i ? ", " : "") + show_text(o.label_classes[i]);
    }
  }
  DType dtype() const { return dtype_; }
  double read(const Field& f, const Plan& p, const std::string& name) const {
    if (ids_.empty() && dtype_ == DType::f32) return parse_number<float>(f, p, *p.label, name);
    if (ids_.empty()) return parse_number<int32_t>(f, p, *p.label, name);
    auto it = ids_.find(std::string(trimmed(f.text)));
    if (it == ids_.end())
      fail_at(name, {f.line, f.column}, column_str(p, *p.label) + ": " + show_text(f.text) +
                                            " is not one of the label_classes (" + classes_ + ")");
    return it->second;
  }

 private:
  DType dtype_;
  std::unordered_map<std::string, int32_t> ids_;
  std::string classes_;
};

// ---- records to tensors ----

void check_width(const Record& r, Place end, const Plan& p, bool header, const std::string& name) {
  if (r.size() == p.names.size()) return;
  Place at = r.size() > p.names.size() ? Place{r[p.names.size()].line, r[p.names.size()].column} : end;
  fail_at(name, at, "expected " + std::to_string(p.names.size()) + " fields (as in the " +
                        (header ? "header" : "first record") + "), found " + std::to_string(r.size()));
}

struct Columns {
  std::vector<double> features, labels;
  int64_t rows = 0;
};

void append(Columns& out, const Record& r, const Plan& p, const CsvOptions& o, const LabelReader& labels,
            const std::string& name) {
  for (size_t c : p.features)
    out.features.push_back(o.feature_dtype == DType::i32 ? double(parse_number<int32_t>(r[c], p, c, name))
                                                         : double(parse_number<float>(r[c], p, c, name)));
  if (p.label) out.labels.push_back(labels.read(r[*p.label], p, name));
  ++out.rows;
}

Tensor to_tensor(const std::vector<double>& values, DType dtype, Shape shape) {
  Tensor t(dtype, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.set(int64_t(i), values[i]);
  return t;
}

void check_options(const CsvOptions& o, const std::string& name) {
  if (o.feature_dtype != DType::f32 && o.feature_dtype != DType::i32)
    throw Error(name + ": CSV features are read as f32 or i32, not " + std::string(name_of(o.feature_dtype)));
  if (o.label_dtype != DType::f32 && o.label_dtype != DType::i32)
    throw Error(name + ": CSV labels are read as f32 or i32, not " + std::string(name_of(o.label_dtype)));
  if (o.delimiter == '"' || o.delimiter == '\n' || o.delimiter == '\r')
    throw Error(name + ": the delimiter cannot be a quote or a line break");
}

}  // namespace

CsvData parse_csv(std::string_view text, const std::string& name, const CsvOptions& o) {
  check_options(o, name);
  Tokenizer tok(text, name, o.delimiter);
  Record r;
  Place end;
  if (!tok.next(r, end)) throw Error(name + ": empty CSV file" + (o.header ? " (no header row)" : ""));
  Plan plan = make_plan(o, column_names(r, o.header), name);
  const LabelReader labels(o);
  Columns cols;
  if (!o.header) append(cols, r, plan, o, labels, name);
  while (tok.next(r, end)) {
    check_width(r, end, plan, o.header, name);
    append(cols, r, plan, o, labels, name);
  }
  CsvData d;
  d.features = to_tensor(cols.features, o.feature_dtype, {cols.rows, int64_t(plan.features.size())});
  if (plan.label) d.labels = to_tensor(cols.labels, labels.dtype(), {cols.rows});
  for (size_t c : plan.features) d.feature_names.push_back(plan.names[c]);
  return d;
}

// The whole file (gunzipped when its name ends in ".gz", as IDX files may be).
CsvData read_csv(const std::string& path, const CsvOptions& o) {
  std::unique_ptr<ByteSource> src = open_file_source(path, "a CSV file");
  std::string text;
  for (size_t chunk = size_t(1) << 16;; chunk = std::min(chunk * 2, size_t(1) << 26)) {
    const size_t had = text.size();
    text.resize(had + chunk);
    const size_t got = src->read(std::as_writable_bytes(std::span(text.data() + had, chunk)));
    text.resize(had + got);
    if (got < chunk) break;
  }
  return parse_csv(text, path, o);
}

}  // namespace tpu
