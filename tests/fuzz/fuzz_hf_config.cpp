// libFuzzer target: parse_hf_config (Hugging Face config.json) and the plan built from it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "moejit/error.hpp"
#include "moejit/model.hpp"
#include "moejit/prewarm.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  try {
    const moejit::ModelSpec m = moejit::parse_hf_config(text, "fuzz");
    (void)m.to_string();
    moejit::PlanOptions o;
    o.max_num_tokens = 64;
    o.quant = moejit::QuantMode::bf16;
    (void)moejit::enumerate_keys(moejit::make_plan(m, o));
  } catch (const moejit::Error&) {
  }
  return 0;
}
