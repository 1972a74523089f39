// Streams one DSML `invoke` while the model writes it: the call's name once decided, then the part
// of its arguments JSON that no later text can change, so tool-call arguments reach clients in
// fragments. ReadDsmlStep (dsml.h) stays the authority: for a well-formed call, what this emits
// is a prefix of the arguments it builds. Used by encoding/output_parser; one per parser.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "encoding/dsml.h"

namespace flashserve::encoding {

class InvokeStream {
 public:
  explicit InvokeStream(const DsmlTags& tags);

  // The next step of the tool-call block starts at `pos` (just past the block-start marker or a
  // previous `</｜DSML｜invoke`); forgets the previous call.
  void Restart(size_t pos);

  struct Progress {
    bool began = false;     // the call's name was decided by this text
    std::string name;       // with `began`
    std::string arguments;  // arguments text decided by this text
  };
  // `text` is the whole block so far (it only grows between calls).
  Progress Advance(std::string_view text);

  bool began() const { return began_; }
  const std::string& emitted() const { return emitted_; }  // arguments text emitted for this call

 private:
  enum class Phase { kGap, kName, kParamHead, kValue, kAfterParam, kIdle };

  bool StepGap(std::string_view text);
  bool StepName(std::string_view text, Progress& out);
  bool StepParamHead(std::string_view text, Progress& out);
  bool StepValue(std::string_view text, Progress& out);
  bool StepAfterParam(std::string_view text);
  bool Enter(std::string_view text, std::string_view marker, std::string_view other, Phase then);
  bool FinishParam(std::string_view text, size_t value_end, Progress& out);
  void Emit(std::string_view piece, Progress& out);
  void EmitValue(std::string_view raw, Progress& out);

  std::string invoke_start_, invoke_end_, param_start_, param_end_;
  std::string gap_invoke_, gap_param_, gap_close_;  // ">\n" + the tag that may follow
  std::string value_end_, value_end_nl_;             // what ends a value: "<" or "<\n" + param_end_
  Phase phase_ = Phase::kIdle;
  size_t pos_ = 0;         // start of what the current phase reads
  size_t scan_from_ = 0;   // where the current phase's next search may start
  size_t value_at_ = 0;    // start of the current parameter's value
  size_t value_sent_ = 0;  // end of the value bytes already emitted
  bool is_string_ = false;
  size_t num_params_ = 0;
  bool began_ = false;
  std::string emitted_;
};

}  // namespace flashserve::encoding
