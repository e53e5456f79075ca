// Uploaded training data (POST /v1/files, purpose "fine-tune"): kept in DATA/files/ as
// <id>.jsonl with its record <id>.json, both written atomically (job/atomic_file.h), so a
// restart lists the same files. A file is named by its id only: the uploaded filename is kept
// as a label and never used as a path.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace nl::serve {

// A random id with a prefix: "file-" + 24 hex digits (from std::random_device).
std::string random_id(const std::string& prefix);
int64_t unix_now();

// Checks that `bytes` is JSONL (one JSON object per line) or one JSON array of objects, as
// `train` reads: a 400 naming the line otherwise.
void check_training_data(const std::string& bytes);
// check_training_data, after checking purpose is "fine-tune" (400 naming 'purpose').
void check_training_file(const std::string& purpose, const std::string& bytes);

class FileStore {
 public:
  FileStore(const std::string& dir, int max_files);  // creates DIR, reads the records there
  // Checks the file (check_training_file), keeps it, returns the file object.
  nlohmann::json add(const std::string& filename, const std::string& purpose, const std::string& bytes);
  // The record of `id`, or a 404 naming `param`.
  nlohmann::json get(const std::string& id, const std::string& param) const;
  std::vector<nlohmann::json> list() const;
  // The data's path on this server (for the training job), or a 404 naming `param`.
  std::string data_path(const std::string& id, const std::string& param) const;

 private:
  std::string dir_;
  int max_files_;
  mutable std::mutex mu_;
  std::map<std::string, nlohmann::json> records_;
};

}  // namespace nl::serve
