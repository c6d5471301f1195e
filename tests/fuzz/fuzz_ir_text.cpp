// libFuzzer target: the IR text parser (engine/ir/text.cpp parse_graph). A graph it accepts
// must verify without crashing and print back to text that parses to the same text.
#include "fuzz_common.h"
#include "ir/graph.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 64 * 1024) return 0;  // long texts only slow the search down
  fuzz::expect_only_tpu_errors([&] {
    tpu::Graph g = tpu::parse_graph(std::string(fuzz::text(data, size)));
    tpu::verify_graph(g);
    std::string printed = tpu::print_graph(g);
    std::string again = tpu::print_graph(tpu::parse_graph(printed));
    if (again != printed) fuzz::finding("print -> parse -> print changed the text:\n" + printed + "---\n" + again);
  });
  return 0;
}
