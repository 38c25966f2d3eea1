// Private to codegen/src/super_schedule*.cpp: what the parts of super_schedule.hpp share (the
// checks and messages every way into a SuperSchedule runs through). The parts:
//   super_schedule.cpp       the value type, checking (check_schedule, validate, finish), the
//                            canonical form and the hash
//   super_schedule_text.cpp  the one text form: the printer (to_text), the parser
//                            (parse_schedule) and its tokens (parse_loop, parse_formats, parse_int)
//   super_schedule_json.cpp  the versioned JSON form, the named shortcuts, schedule_from_string
//                            and the schedule lists (read_schedule_list, shipped_schedules)
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "waco/codegen/super_schedule.hpp"
#include "waco/kernels/kernel.hpp"

namespace waco::codegen::detail {

// super_schedule.cpp (each documented there).
bool is_pow2(long long x);
std::string kname(kernels::KernelKind k);
std::string var_list(const std::vector<char>& vars);
std::string other_kernel_note(kernels::KernelKind k, char v);
SuperSchedule finish(const SuperSchedule& raw, const std::vector<bool>& unit_pairs,
                     const std::function<void(const std::vector<std::string>&)>& fail);

// super_schedule_text.cpp (each documented there).
std::optional<Loop> parse_loop(const std::string& t);
extern const char* kLoopSyntax;
std::vector<LevelFormat> parse_formats(const std::string& f, std::vector<std::string>& errors);
std::optional<int> parse_int(const std::string& t);
std::string text_hint(kernels::KernelKind k);

}  // namespace waco::codegen::detail
