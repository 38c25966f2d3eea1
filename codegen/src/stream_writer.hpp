// The output's streaming writer, as source text: the helpers a kernel whose register block
// streams its flush (streams_output) carries before its loop nest (emitter.cpp).
#pragma once

#include <string>

#include "waco/codegen/emitter.hpp"

namespace waco::codegen {

/// The writer's source for `form`: a shared object includes <immintrin.h> (a header does so up
/// front), keeps the helpers to itself (static inline) and exports the test probe's counter
/// (waco_stream_probe_lines, with -DWACO_STREAM_PROBE); a header defines them inline. Ends with
/// a newline.
std::string stream_writer_source(SourceForm form);

}  // namespace waco::codegen
