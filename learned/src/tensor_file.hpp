// Writing the versioned weights file of learned/ (internal; includes torch), and reading it into
// a network's tensors. The layout and the torch-free reader are in tensor_reader.hpp; WACONet
// weights and cost models are written in this one layout. Files are written to <path>.tmp and
// renamed, so a killed writer never leaves a torn file. read_into checks every tensor's name and
// shape against the network the header describes; every failure is a kernels::Error naming the
// file.
#pragma once

#include <cstdint>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <torch/torch.h>

#include "tensor_reader.hpp"

namespace waco::learned {

/// Writes the file atomically, in `versions.version` (padded where that version is).
void write_tensor_file(const std::string& path, const char (&magic)[8], TensorFileVersions versions,
                       const std::string& header,
                       const std::vector<std::pair<std::string, torch::Tensor>>& tensors);

/// Every parameter and buffer of a module, by name (the tensors a weights file holds).
std::vector<std::pair<std::string, torch::Tensor>> module_tensors(const torch::nn::Module& m);

/// Fills `want` from the reader's tensors (copy_, no grad): the file must hold exactly these
/// names with these shapes (kernels::Error naming the file otherwise).
void read_into(TensorFileReader& reader, std::map<std::string, torch::Tensor> want);

}  // namespace waco::learned
