// The golden runner's masking, diff and process capture (interpreter/golden.h).
#include <doctest.h>

#include <filesystem>

#include "golden.h"

using namespace std::chrono_literals;
namespace golden = tpu::golden;

TEST_CASE("mask: durations become <T>") {
  CHECK(golden::mask("234/234 [====] - 3s 11ms/step - loss: 0.4012\n") ==
        "234/234 [====] - <T> <T>/step - loss: 0.4012\n");
  CHECK(golden::mask("compile: 12.3 ms, run 1.2s, 45us/step, 7ns, 2\u00b5s") ==
        "compile: <T>, run <T>, <T>/step, <T>, <T>");
  CHECK(golden::mask("3s") == "<T>");
}

TEST_CASE("mask: throughput becomes <R> WORD/s") {
  CHECK(golden::mask("1234 samples/s") == "<R> samples/s");
  CHECK(golden::mask("5.5 steps/s and 99tokens/s") == "<R> steps/s and <R> tokens/s");
}

TEST_CASE("mask: leaves everything else alone") {
  for (const char* text : {"5 steps", "10 samples", "v3s", "x2.5ms", "loss: 0.25", "f32[8,10]",
                           "Epoch 1/3", "3 items/sec", "12 msgs", "1.5e-3", "TPU v2 8.00 GiB"}) {
    CHECK(golden::mask(text) == text);
  }
}

TEST_CASE("mask: is idempotent") {
  std::string once = golden::mask("1/1 - 0s 3ms/step - 100 samples/s");
  CHECK(golden::mask(once) == once);
}

TEST_CASE("same_within_last_digit: decimals may differ by one in the last printed digit") {
  CHECK(golden::same_within_last_digit("val_loss: 1.6696 - acc: 0.6130\n", "val_loss: 1.6697 - acc: 0.6130\n"));
  CHECK(golden::same_within_last_digit("x 0.0000", "x -0.0001"));
  CHECK(golden::same_within_last_digit("1.999 2.000", "2.000 1.999"));
  CHECK_FALSE(golden::same_within_last_digit("val_loss: 1.6696", "val_loss: 1.6698"));
  CHECK_FALSE(golden::same_within_last_digit("loss 1.6696", "loss 1.669"));    // digits differ
  CHECK_FALSE(golden::same_within_last_digit("12 steps", "13 steps"));          // integers exact
  CHECK_FALSE(golden::same_within_last_digit("nn.Dropout(0.1)", "nn.Dropout(0.2)"));  // settings exact
  CHECK_FALSE(golden::same_within_last_digit("lr 0.05, 2.4 MiB", "lr 0.06, 2.4 MiB"));
  CHECK(golden::same_within_last_digit("acc 0.613", "acc 0.614"));
  CHECK_FALSE(golden::same_within_last_digit("v1.5", "v1.6"));                  // inside a word
  CHECK_FALSE(golden::same_within_last_digit("a 1.5", "a 1.5 b"));
  CHECK_FALSE(golden::same_within_last_digit("loss: 1.6696", "LOSS: 1.6696"));
}

TEST_CASE("diff: equal texts give nothing") {
  CHECK(golden::unified_diff("", "", "a", "b").empty());
  CHECK(golden::unified_diff("x\ny\n", "x\ny\n", "a", "b").empty());
}

TEST_CASE("diff: one changed line with context") {
  std::string d = golden::unified_diff("1\n2\n3\n4\n5\n6\n7\n8\n", "1\n2\n3\n4\nfive\n6\n7\n8\n",
                                       "t.out (expected)", "t.out (actual)");
  CHECK(d ==
        "--- t.out (expected)\n+++ t.out (actual)\n"
        "@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n");
}

TEST_CASE("diff: additions, deletions and separate hunks") {
  std::string a, b;
  for (int i = 1; i <= 20; ++i) {
    a += std::to_string(i) + "\n";
    if (i != 3) b += std::to_string(i) + "\n";
    if (i == 15) b += "new\n";
  }
  CHECK(golden::unified_diff(a, b, "e", "a") ==
        "--- e\n+++ a\n"
        "@@ -1,6 +1,5 @@\n 1\n 2\n-3\n 4\n 5\n 6\n"
        "@@ -13,6 +12,7 @@\n 13\n 14\n 15\n+new\n 16\n 17\n 18\n");
}

TEST_CASE("diff: empty sides and missing final newline") {
  CHECK(golden::unified_diff("", "x\n", "e", "a") == "--- e\n+++ a\n@@ -0,0 +1 @@\n+x\n");
  CHECK(golden::unified_diff("x\n", "", "e", "a") == "--- e\n+++ a\n@@ -1 +0,0 @@\n-x\n");
  CHECK(golden::unified_diff("x\n", "x", "e", "a") ==
        "--- e\n+++ a\n@@ -1 +1 @@\n-x\n+x\n\\ No newline at end of file\n");
}

TEST_CASE("diff: close changes share a hunk") {
  CHECK(golden::unified_diff("a\nb\nc\nd\ne\nf\ng\nh\n", "A\nb\nc\nd\ne\nf\ng\nH\n", "e", "a") ==
        "--- e\n+++ a\n@@ -1,8 +1,8 @@\n-a\n+A\n b\n c\n d\n e\n f\n g\n-h\n+H\n");
}

TEST_CASE("run_captured: both streams, exit code, directory and environment") {
  auto r = golden::run_captured(
      {"/bin/sh", "-c", "pwd; echo \"$TPUTRAIN_GOLDEN\"; echo oops >&2; read x || echo eof; exit 3"},
      "/tmp", 10s);
  CHECK(r.out == "/tmp\n1\neof\n");
  CHECK(r.err == "oops\n");
  CHECK(r.exit_code == 3);
  CHECK(!r.timed_out);
}

TEST_CASE("run_captured: large output on both streams does not deadlock") {
  auto r = golden::run_captured(
      {"/bin/sh", "-c", "i=0; while [ $i -lt 3000 ]; do echo 0123456789012345678901234567890123456789; "
                        "echo abcdefghijabcdefghijabcdefghijabcdefghij >&2; i=$((i+1)); done"},
      ".", 60s);
  CHECK(r.out.size() == 3000 * 41);
  CHECK(r.err.size() == 3000 * 41);
  CHECK(r.exit_code == 0);
}

TEST_CASE("run_captured: time limit kills the process group") {
  auto r = golden::run_captured({"/bin/sh", "-c", "echo start; sleep 30 & sleep 30"}, ".", 300ms);
  CHECK(r.timed_out);
  CHECK(r.out == "start\n");
  // what it was doing: the shell's threads, waiting
  CHECK(r.stuck.find("the process (" + std::filesystem::canonical("/bin/sh").string() + ")") != std::string::npos);
  CHECK(r.stuck.find("thread ") != std::string::npos);
  CHECK(r.stuck.find(" state S") != std::string::npos);
}

TEST_CASE("run_captured: a missing program exits 127 with a message") {
  auto r = golden::run_captured({"/nonexistent/prog"}, ".", 10s);
  CHECK(r.exit_code == 127);
  CHECK(r.err.find("cannot run /nonexistent/prog") != std::string::npos);
}
