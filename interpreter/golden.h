// The pieces of the golden test runner (`tputrain test`), exposed for unit tests.
//
//   std::string a = tpu::golden::mask("234/234 - 3s 11ms/step\n");   // "234/234 - <T> <T>/step\n"
//   bool ok = tpu::golden::same_within_last_digit("loss: 1.6696", "loss: 1.6697");   // true
//   std::string d = tpu::golden::unified_diff(expected, actual, "NAME.out (expected)",
//                                             "NAME.out (actual)");    // "" when equal
//   tpu::golden::Run r = tpu::golden::run_captured({"/bin/echo", "hi"}, ".", std::chrono::seconds(5));
#pragma once
#include <chrono>
#include <string>
#include <string_view>
#include <vector>

namespace tpu::golden {

// Replaces the parts of a script's output that change from run to run with fixed tokens:
//   durations   a number, an optional space, then ns|us|µs|ms|s   ->  <T>
//               ("3s", "12.3 ms", "11ms/step" -> "<T>/step")
//   throughput  a number, an optional space, then WORD/s          ->  <R> WORD/s
//               ("1234 samples/s" -> "<R> samples/s", "5.1 steps/s" -> "<R> steps/s")
// A number only counts when it does not continue a word ("v3s", "x2.5ms" stay) and the unit
// ends the word ("5 steps", "2 samples" stay). Masking is idempotent.
std::string mask(std::string_view text);

// True when `expected` and `actual` are the same text except for decimals ("1.6696") that are
// printed with the same number of digits after the point, at least 3, and differ by at most one
// unit in the last digit (with the sign: "-0.0001" and "0.0000" agree). Kernels take the instruction set of
// the CPU at hand (AVX2, AVX-512, AMX), whose sums round differently, so a value near a rounding
// boundary prints one way on one machine and the other way elsewhere. Integers, text and the
// number of digits must match exactly.
bool same_within_last_digit(std::string_view expected, std::string_view actual);

// A unified diff (3 lines of context) from `expected` to `actual`, with `---`/`+++` headers
// naming the two sides; "" when the texts are equal. A last line without a newline is
// followed by "\ No newline at end of file".
std::string unified_diff(std::string_view expected, std::string_view actual,
                         std::string_view expected_name, std::string_view actual_name);

// What a child process did.
struct Run {
  std::string out, err;  // everything it wrote on stdout and stderr
  int exit_code = -1;    // when it exited normally, else -1
  int signal = 0;        // the signal that killed it, else 0
  bool timed_out = false;
  std::string stuck;     // on a time-out: what the process and its threads were doing
};

// Runs argv[0] (a path) with the given arguments in directory `dir`, stdin from /dev/null,
// the current environment plus TPUTRAIN_GOLDEN=1, capturing both output streams. After
// `limit` the child's whole process group is killed and the result says timed_out.
// Throws tpu::Error when the process cannot be started.
Run run_captured(const std::vector<std::string>& argv, const std::string& dir,
                 std::chrono::milliseconds limit);

}  // namespace tpu::golden
