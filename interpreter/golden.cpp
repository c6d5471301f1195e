// `tputrain test PATH... [--update]`: runs each NAME.lua in a fresh process and compares its
// output with NAME.out (stdout) and NAME.err (stderr, present when the script must fail).
//
// Output that changes from run to run is masked in both the expected and the actual text before
// comparing (see golden::mask in golden.h): durations ("3s", "11ms/step", "12.3 ms", "45us/step")
// become <T> and throughput ("1234 samples/s") becomes "<R> samples/s". `--update` writes the
// masked output, so expectation files hold the tokens.
#include "golden.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <span>
#include <sstream>
#include <thread>
#include <utility>

#include "cli.h"
#include "core/error.h"
#include "io/atomic_file.h"

extern char** environ;

namespace tpu::golden {
namespace {

bool is_word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
bool is_digit(char c) { return std::isdigit(static_cast<unsigned char>(c)) != 0; }
bool ends_word(std::string_view s, size_t end) { return end == s.size() || !is_word_char(s[end]); }

// Length of the number ("12", "12.5") at s[i], 0 when there is none.
size_t number_length(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && is_digit(s[j])) ++j;
  if (j == i) return 0;
  if (j + 1 < s.size() && s[j] == '.' && is_digit(s[j + 1])) {
    for (++j; j < s.size() && is_digit(s[j]);) ++j;
  }
  return j - i;
}

// Length of a time unit that ends the word at s[i], 0 when there is none.
size_t unit_length(std::string_view s, size_t i) {
  for (std::string_view unit : {"ns", "us", "\u00b5s", "ms", "s"}) {
    if (s.substr(i).starts_with(unit) && ends_word(s, i + unit.size())) return unit.size();
  }
  return 0;
}

// Length of "WORD/s" ending the word at s[i], 0 when there is none.
size_t rate_length(std::string_view s, size_t i) {
  size_t j = i;
  while (j < s.size() && std::isalpha(static_cast<unsigned char>(s[j]))) ++j;
  if (j == i || s.substr(j, 2) != "/s" || !ends_word(s, j + 2)) return 0;
  return j + 2 - i;
}

}  // namespace

std::string mask(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    bool starts = i == 0 || (!is_word_char(s[i - 1]) && s[i - 1] != '.');
    size_t num = starts ? number_length(s, i) : 0;
    if (num == 0) {
      out += s[i++];
      continue;
    }
    size_t after = i + num + (i + num < s.size() && s[i + num] == ' ');
    if (size_t rate = rate_length(s, after)) {
      out += "<R> ";
      out += s.substr(after, rate);
      i = after + rate;
    } else if (size_t unit = unit_length(s, after)) {
      out += "<T>";
      i = after + unit;
    } else {
      out += s.substr(i, num);
      i += num;
    }
  }
  return out;
}

namespace {

// The decimal ("-1.25", "0.5") starting at s[i] when it starts a word: its digits without the
// point, its digits after the point and its length; length 0 when there is none.
struct Decimal {
  long long scaled = 0;  // the value times 10^fraction_digits
  size_t fraction_digits = 0, length = 0;
};

Decimal decimal_at(std::string_view s, size_t i) {
  if (i > 0 && (is_word_char(s[i - 1]) || s[i - 1] == '.')) return {};
  bool negative = s[i] == '-' && i + 1 < s.size();
  size_t start = i + negative, len = number_length(s, start);
  size_t point = s.substr(start, len).find('.');
  // 18 digits fit a long long; longer numbers are compared as text.
  if (len == 0 || point == std::string_view::npos || len > 18) return {};
  Decimal d{0, len - point - 1, len + negative};
  for (char c : s.substr(start, len)) {
    if (c != '.') d.scaled = d.scaled * 10 + (c - '0');
  }
  if (negative) d.scaled = -d.scaled;
  return d;
}

}  // namespace

// Fewer digits after the point are settings and sizes ("Dropout(0.1)", "2.4 MiB"), where one
// unit is a real difference; computed values (losses, metrics) print 3 or 4.
constexpr size_t kMinToleratedDigits = 3;

bool same_within_last_digit(std::string_view expected, std::string_view actual) {
  size_t i = 0, j = 0;
  while (i < expected.size() && j < actual.size()) {
    Decimal a = decimal_at(expected, i), b = decimal_at(actual, j);
    if (a.length && b.length && a.fraction_digits == b.fraction_digits &&
        a.fraction_digits >= kMinToleratedDigits && std::llabs(a.scaled - b.scaled) <= 1) {
      i += a.length;
      j += b.length;
    } else if (expected[i] == actual[j]) {
      ++i, ++j;
    } else {
      return false;
    }
  }
  return i == expected.size() && j == actual.size();
}

// ---- unified diff -------------------------------------------------------------------------

namespace {

struct Line {
  std::string_view text;
  bool newline = true;  // false for a last line without '\n'
  bool operator==(const Line&) const = default;
};

std::vector<Line> split_lines(std::string_view s) {
  std::vector<Line> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string_view::npos) {
      lines.push_back({s.substr(start), false});
      break;
    }
    lines.push_back({s.substr(start, end - start), true});
    start = end + 1;
  }
  return lines;
}

enum class Op : char { same = ' ', del = '-', add = '+' };
struct Edit {
  Op op;
  size_t a, b;  // lines of each side before this edit
};

// Above this many LCS cells the changed middle is shown as all deleted, then all added.
constexpr size_t kMaxCells = size_t(1) << 22;

// The edits turning a[0..n) into b[0..m) with the fewest changed lines (longest common
// subsequence by dynamic programming), from line positions a0, b0 on.
void lcs_edits(std::span<const Line> a, std::span<const Line> b, size_t a0, size_t b0,
               std::vector<Edit>& edits) {
  size_t n = a.size(), m = b.size();
  if (n * m > kMaxCells) {
    for (size_t i = 0; i < n; ++i) edits.push_back({Op::del, a0 + i, b0});
    for (size_t j = 0; j < m; ++j) edits.push_back({Op::add, a0 + n, b0 + j});
    return;
  }
  // len[i][j] = LCS length of a[i..n) and b[j..m).
  std::vector<uint32_t> len((n + 1) * (m + 1), 0);
  auto at = [&](size_t i, size_t j) -> uint32_t& { return len[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[i] == b[j] ? at(i + 1, j + 1) + 1 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[i] == b[j]) {
      edits.push_back({Op::same, a0 + i++, b0 + j++});
    } else if (j == m || (i < n && at(i + 1, j) >= at(i, j + 1))) {
      edits.push_back({Op::del, a0 + i++, b0 + j});
    } else {
      edits.push_back({Op::add, a0 + i, b0 + j++});
    }
  }
}

std::vector<Edit> edit_script(const std::vector<Line>& a, const std::vector<Line>& b) {
  size_t pre = 0;
  while (pre < a.size() && pre < b.size() && a[pre] == b[pre]) ++pre;
  size_t suf = 0;
  while (suf < a.size() - pre && suf < b.size() - pre &&
         a[a.size() - 1 - suf] == b[b.size() - 1 - suf]) {
    ++suf;
  }
  std::vector<Edit> edits;
  for (size_t i = 0; i < pre; ++i) edits.push_back({Op::same, i, i});
  std::span<const Line> sa(a), sb(b);
  lcs_edits(sa.subspan(pre, a.size() - pre - suf), sb.subspan(pre, b.size() - pre - suf), pre,
            pre, edits);
  for (size_t k = suf; k > 0; --k) edits.push_back({Op::same, a.size() - k, b.size() - k});
  return edits;
}

// "-3,2" / "+7" / "-4,0": GNU conventions (an empty range names the line before it).
std::string range(char sign, size_t before, size_t count) {
  std::string r(1, sign);
  r += std::to_string(count == 0 ? before : before + 1);
  if (count != 1) r += "," + std::to_string(count);
  return r;
}

void append_hunk(std::string& out, std::span<const Edit> hunk, const std::vector<Line>& a,
                 const std::vector<Line>& b) {
  size_t na = 0, nb = 0;
  for (const Edit& e : hunk) {
    na += e.op != Op::add;
    nb += e.op != Op::del;
  }
  out += "@@ " + range('-', hunk.front().a, na) + " " + range('+', hunk.front().b, nb) + " @@\n";
  for (const Edit& e : hunk) {
    const Line& line = e.op == Op::add ? b[e.b] : a[e.a];
    out += static_cast<char>(e.op);
    out += line.text;
    out += line.newline ? "\n" : "\n\\ No newline at end of file\n";
  }
}

}  // namespace

std::string unified_diff(std::string_view expected, std::string_view actual,
                         std::string_view expected_name, std::string_view actual_name) {
  constexpr size_t context = 3;
  std::vector<Line> a = split_lines(expected), b = split_lines(actual);
  if (a == b) return "";
  std::vector<Edit> edits = edit_script(a, b);
  auto changed = [&](size_t k) { return edits[k].op != Op::same; };
  std::string out = "--- " + std::string(expected_name) + "\n+++ " + std::string(actual_name) + "\n";
  size_t k = 0;
  while (k < edits.size()) {
    size_t first = k;
    while (first < edits.size() && !changed(first)) ++first;
    if (first == edits.size()) break;
    // Extend over later changes that are at most 2*context unchanged lines away.
    size_t last = first, gap = 0;
    for (size_t j = first + 1; j < edits.size() && gap <= 2 * context; ++j) {
      gap = changed(j) ? 0 : gap + 1;
      if (changed(j)) last = j;
    }
    size_t begin = std::max(k, first >= context ? first - context : 0);
    size_t end = std::min(edits.size(), last + 1 + context);
    append_hunk(out, std::span<const Edit>(edits).subspan(begin, end - begin), a, b);
    k = end;
  }
  return out;
}

// ---- running a child process ---------------------------------------------------------------

namespace {

struct Fd {
  int fd = -1;
  Fd() = default;
  explicit Fd(int f) : fd(f) {}
  Fd(Fd&& o) noexcept : fd(std::exchange(o.fd, -1)) {}
  Fd& operator=(Fd&& o) noexcept {
    std::swap(fd, o.fd);
    return *this;
  }
  ~Fd() { reset(); }
  void reset() {
    if (fd >= 0) ::close(fd);
    fd = -1;
  }
};

struct Pipe {
  Fd read, write;
};

Pipe make_pipe() {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw Error(std::string("pipe: ") + std::strerror(errno));
  return {Fd(fds[0]), Fd(fds[1])};
}

std::vector<std::string> child_environment() {
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    if (!std::string_view(*e).starts_with("TPUTRAIN_GOLDEN=")) env.emplace_back(*e);
  }
  env.emplace_back("TPUTRAIN_GOLDEN=1");
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& strings) {
  std::vector<char*> out;
  for (std::string& s : strings) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

[[noreturn]] void child_fail(const char* what, const std::string& name) {
  std::string msg = std::string("tputrain: cannot ") + what + " " + name + ": " + std::strerror(errno) + "\n";
  (void)!::write(2, msg.data(), msg.size());
  ::_exit(127);
}

// In the forked child: becomes its own process group, wires the standard streams, execs.
[[noreturn]] void exec_child(char* const* argv, char* const* envp, const std::string& dir,
                             const Pipe& out, const Pipe& err) {
  ::setpgid(0, 0);
  ::dup2(out.write.fd, 1);
  ::dup2(err.write.fd, 2);
  int null = ::open("/dev/null", O_RDONLY);
  if (null < 0) child_fail("open", "/dev/null");
  ::dup2(null, 0);
  if (::chdir(dir.c_str()) != 0) child_fail("enter", dir);
  ::execve(argv[0], argv, envp);
  child_fail("run", argv[0]);
}

using Clock = std::chrono::steady_clock;

// Reads both pipes until they close or the deadline passes; false on time-out.
bool drain(Fd& out, Fd& err, std::string& out_text, std::string& err_text, Clock::time_point deadline) {
  pollfd fds[2] = {{out.fd, POLLIN, 0}, {err.fd, POLLIN, 0}};
  std::string* texts[2] = {&out_text, &err_text};
  char buf[65536];
  while (fds[0].fd >= 0 || fds[1].fd >= 0) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    int n = ::poll(fds, 2, int(std::min<int64_t>(left.count(), 1 << 30)));
    if (n < 0 && errno != EINTR) throw Error(std::string("poll: ") + std::strerror(errno));
    for (int k = 0; k < 2 && n > 0; ++k) {
      if (fds[k].fd < 0 || fds[k].revents == 0) continue;
      ssize_t got = ::read(fds[k].fd, buf, sizeof buf);
      if (got > 0) texts[k]->append(buf, size_t(got));
      else if (got == 0 || errno != EINTR) fds[k].fd = -1;  // closed (owners close the fds)
    }
  }
  return true;
}

// Waits for the child until the deadline; false on time-out.
bool wait_child(pid_t pid, int& status, Clock::time_point deadline) {
  while (true) {
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return true;
    if (r < 0 && errno != EINTR) throw Error(std::string("waitpid: ") + std::strerror(errno));
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

// One line per thread of a process that ran out of time: its name, state and the kernel
// function it waits in ("tputrain S futex_wait_queue"), and what the process runs: a hang and
// a slow run read differently, and a child that never reached exec shows as the runner.
std::string describe_stuck(pid_t pid) {
  namespace fs = std::filesystem;
  const fs::path proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  std::string text = "the process (" + fs::read_symlink(proc / "exe", ec).string() + "):\n";
  for (const auto& task : fs::directory_iterator(proc / "task", ec)) {
    std::ifstream stat(task.path() / "stat"), wchan(task.path() / "wchan");
    std::string line, wait;
    std::getline(stat, line);
    std::getline(wchan, wait);
    // stat: "tid (name) S ..."; the name may hold spaces, so it ends at the last ')'.
    const size_t open = line.find('('), close = line.rfind(')');
    if (open == std::string::npos || close == std::string::npos || close + 2 >= line.size()) continue;
    text += "  thread " + task.path().filename().string() + " " + line.substr(open + 1, close - open - 1) +
            " state " + line[close + 2] + (wait.empty() || wait == "0" ? "" : " in " + wait) + "\n";
  }
  return text;
}

}  // namespace

Run run_captured(const std::vector<std::string>& argv, const std::string& dir,
                 std::chrono::milliseconds limit) {
  if (argv.empty()) throw Error("run_captured: no program");
  Pipe out = make_pipe(), err = make_pipe();
  std::vector<std::string> args = argv, env = child_environment();
  std::vector<char*> cargs = c_strings(args), cenv = c_strings(env);
  auto deadline = Clock::now() + limit;
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) exec_child(cargs.data(), cenv.data(), dir, out, err);
  ::setpgid(pid, pid);  // also done by the child; whichever runs first wins the race
  out.write.reset();
  err.write.reset();
  Run run;
  int status = 0;
  run.timed_out = !drain(out.read, err.read, run.out, run.err, deadline) ||
                  !wait_child(pid, status, deadline);
  if (run.timed_out) {
    run.stuck = describe_stuck(pid);
    ::kill(-pid, SIGKILL);
    ::kill(pid, SIGKILL);
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  if (WIFSIGNALED(status)) run.signal = WTERMSIG(status);
  return run;
}

}  // namespace tpu::golden

// ---- the runner ----------------------------------------------------------------------------

namespace tpu {
namespace {

namespace fs = std::filesystem;
constexpr std::chrono::seconds kTimeLimit{120};

struct Script {
  fs::path dir;      // where the script runs
  std::string name;  // file name without .lua
};

Script script_at(const fs::path& file) {
  fs::path dir = file.parent_path();
  return {dir.empty() ? fs::path(".") : dir, file.stem().string()};
}

bool is_script(const fs::path& p) { return p.extension() == ".lua"; }

// The scripts the paths name (directories: their *.lua, sorted, not recursive); on a bad path,
// or a directory without scripts, returns the problem in `problem`.
std::vector<Script> collect_scripts(const std::vector<std::string>& paths, std::string& problem) {
  std::vector<Script> scripts;
  for (const std::string& p : paths) {
    std::error_code ec;
    fs::file_status st = fs::status(p, ec);
    if (fs::is_directory(st)) {
      std::vector<fs::path> found;
      for (const fs::directory_entry& e : fs::directory_iterator(p, ec)) {
        if (is_script(e.path()) && e.is_regular_file()) found.push_back(e.path());
      }
      if (found.empty()) {  // a typo'd or wrong directory must not pass as "0 passed, 0 failed"
        problem = "no tests found in " + p + " (no NAME.lua in it; subdirectories are not searched)";
        return {};
      }
      std::sort(found.begin(), found.end());
      for (const fs::path& f : found) scripts.push_back(script_at(f));
    } else if (fs::is_regular_file(st) && is_script(p)) {
      scripts.push_back(script_at(p));
    } else {
      problem = fs::exists(st) ? p + " is neither a .lua file nor a directory"
                               : "cannot open " + p + ": No such file or directory";
      return {};
    }
  }
  return scripts;
}

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An expectation file --update may replace: never a symbolic link, whose target (anywhere on
// the machine) it would overwrite or leave stale.
void refuse_link(const fs::path& p) {
  if (fs::is_symlink(fs::symlink_status(p)))
    throw Error(p.string() + " is a symbolic link; --update writes only regular files (replace the link with a copy to update it)");
}

// Replaces p whole (a crash leaves the old file or the new one).
void write_file(const fs::path& p, const std::string& text) {
  refuse_link(p);
  write_file_atomic(p.string(), text);
}

// The outcome of one script: why it failed (empty when it passed) and what to show.
struct Verdict {
  std::vector<std::string> reasons;
  std::string details;
};

// Adds `reason` and the diff to `v` unless the texts agree to the last printed digit.
void compare(std::string_view expected, std::string_view actual, const std::string& file,
             const std::string& reason, Verdict& v) {
  if (golden::same_within_last_digit(expected, actual)) return;
  v.reasons.push_back(reason);
  v.details += golden::unified_diff(expected, actual, file + " (expected)", file + " (actual)");
}

// Compares a finished run with the expectation files (or rewrites them with `update`).
Verdict judge(const Script& s, const golden::Run& run, bool update) {
  Verdict v;
  fs::path out_file = s.dir / (s.name + ".out"), err_file = s.dir / (s.name + ".err");
  std::string out = golden::mask(run.out), err = golden::mask(run.err);
  bool failed = run.exit_code != 0;
  if (update) {
    refuse_link(out_file);
    refuse_link(err_file);
    write_file(out_file, out);
    if (failed) write_file(err_file, err);
    else fs::remove(err_file);
    return v;
  }
  if (!fs::exists(out_file)) {
    v.reasons.push_back("no " + s.name + ".out; create it with 'tputrain test --update'");
    return v;
  }
  bool expect_failure = fs::exists(err_file);
  if (failed && !expect_failure) {
    v.reasons.push_back("exit status " + std::to_string(run.exit_code));
    v.details += err;
  }
  if (!failed && expect_failure) v.reasons.push_back("exit status 0, " + s.name + ".err expects a failure");
  compare(golden::mask(read_file(out_file)), out, s.name + ".out", "stdout differs", v);
  if (expect_failure) compare(golden::mask(read_file(err_file)), err, s.name + ".err", "stderr differs", v);
  return v;
}

Verdict check_script(const Script& s, bool update, const std::string& self_exe) {
  golden::Run run = golden::run_captured({self_exe, s.name + ".lua"}, s.dir.string(), kTimeLimit);
  if (run.timed_out) {
    return {{"timed out after " + std::to_string(kTimeLimit.count()) + " s"},
            "stdout so far:\n" + run.out + "stderr so far:\n" + run.err + run.stuck};
  }
  if (run.signal) return {{std::string("killed by signal ") + strsignal(run.signal)}, run.err};
  return judge(s, run, update);
}

std::string join(const std::vector<std::string>& parts, std::string_view sep) {
  std::string out;
  for (const std::string& p : parts) out += (out.empty() ? "" : std::string(sep)) + p;
  return out;
}

}  // namespace

int run_golden(const std::vector<std::string>& paths, bool update, const std::string& self_exe) {
  std::string problem = paths.empty() ? "'test' needs at least one PATH (a .lua file or a directory)" : "";
  std::vector<Script> scripts = problem.empty() ? collect_scripts(paths, problem) : std::vector<Script>{};
  if (!problem.empty()) {
    std::fprintf(stderr, "tputrain: test: %s\ntry 'tputrain --help'\n", problem.c_str());
    return 2;
  }
  int passed = 0, failed = 0;
  for (const Script& s : scripts) {
    Verdict v;
    try {
      v = check_script(s, update, self_exe);
    } catch (const std::exception& e) {
      v.reasons = {e.what()};
    }
    if (v.reasons.empty()) {
      std::printf("ok %s\n", s.name.c_str());
      ++passed;
    } else {
      std::printf("FAIL %s (%s)\n%s", s.name.c_str(), join(v.reasons, "; ").c_str(), v.details.c_str());
      if (!v.details.empty() && v.details.back() != '\n') std::printf("\n");
      ++failed;
    }
    std::fflush(stdout);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}

}  // namespace tpu
