// The fuzz targets' entry functions (fuzz/README.md): one per file format waco-hybrid reads, each
// taking the bytes of one input. libFuzzer runs them under ASan and UBSan (fuzz_<name>, built by
// the WACO_FUZZ option with clang), and the ordinary test suite replays the regression corpus
// tests/corpus/<name>/ through the same functions (fuzz_replay, any compiler).
//
// The contract: an entry function returns normally on every input. A refusal is a
// kernels::Error, caught inside. Anything else is a finding: another exception escaping
// (std::bad_alloc, a JSON library exception, an InternalError from a broken invariant), a
// sanitizer report, or a failed check of what was read (FUZZ_CHECK: an operand read must be
// canonical and read back bit for bit after writing it; a schedule must print, parse and encode
// back to itself; a recipe must survive its JSON form), which prints the problem and aborts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace waco::fuzz {

using Entry = void (*)(const std::uint8_t* data, std::size_t size);

struct Target {
  const char* name;  ///< fuzz_<name>, tests/corpus/<name>/
  Entry run;
  const char* reads;  ///< what the input is, for --help and the README
};

/// Every target, in a fixed order.
const std::vector<Target>& targets();
/// The target called `name`, or nullptr.
const Target* find_target(std::string_view name);

/// Seeds made in code, for targets whose project files are too large to fuzz from (the shipped
/// cost models: 0.6 MB) or must be made under a key (tuning-cache entries, plan files): written
/// into `dir` (created); returns how many. 0 for the other targets.
int write_generated_seeds(const std::string& target, const std::string& dir);

// The entry functions.
void matrix_market(const std::uint8_t* data, std::size_t size);     ///< the bytes of a .mtx / .mtx.gz
void matrix_market_gz(const std::uint8_t* data, std::size_t size);  ///< .mtx text, gzip-compressed first
void frostt(const std::uint8_t* data, std::size_t size);            ///< the bytes of a .tns / .tns.gz
void schedule_text(const std::uint8_t* data, std::size_t size);     ///< kernel byte + schedule text
void schedule_json(const std::uint8_t* data, std::size_t size);     ///< schedule JSON
void recipe(const std::uint8_t* data, std::size_t size);            ///< a recipe file (JSON lines)
void tuning_cache(const std::uint8_t* data, std::size_t size);      ///< flag byte + cache entry
void plan_file(const std::uint8_t* data, std::size_t size);         ///< flag byte + plan file
void dataset_export(const std::uint8_t* data, std::size_t size);    ///< export file (.jsonl[.gz])
void cost_model(const std::uint8_t* data, std::size_t size);        ///< a cost model file
void hnsw_index(const std::uint8_t* data, std::size_t size);        ///< flag + index header + graph
void results_db(const std::uint8_t* data, std::size_t size);        ///< a results database file
void cache_probe(const std::uint8_t* data, std::size_t size);       ///< a cache-probe file (JSON)

}  // namespace waco::fuzz
