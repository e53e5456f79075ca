#include "serve/file_store.h"

#include <chrono>
#include <filesystem>
#include <random>

#include "nightlora/job/atomic_file.h"
#include "nightlora/job/file_ops.h"
#include "nightlora/util/error.h"
#include "serve/api_error.h"

namespace fs = std::filesystem;

namespace nl::serve {

std::string random_id(const std::string& prefix) {
  static std::mutex mu;
  static std::random_device rd;
  std::lock_guard<std::mutex> lock(mu);
  static const char* hex = "0123456789abcdef";
  std::string s = prefix;
  for (int i = 0; i < 24; ++i) s += hex[rd() & 15];
  return s;
}

int64_t unix_now() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch()).count();
}

namespace {

// An id as this server makes them: the prefix and 24 lowercase hex digits. Anything else
// (a path, "..", a name of another length) cannot name one of its files.
bool well_formed_id(const std::string& id, const std::string& prefix) {
  if (id.size() != prefix.size() + 24 || id.compare(0, prefix.size(), prefix) != 0) return false;
  for (size_t i = prefix.size(); i < id.size(); ++i)
    if (!((id[i] >= '0' && id[i] <= '9') || (id[i] >= 'a' && id[i] <= 'f'))) return false;
  return true;
}

}  // namespace

void check_training_data(const std::string& bytes) {
  size_t start = bytes.find_first_not_of(" \t\r\n");
  if (start == std::string::npos) bad_request("the file is empty: upload JSONL, one training example per line", "file");
  if (bytes[start] == '[') {
    nlohmann::json j = nlohmann::json::parse(bytes, nullptr, false);
    if (j.is_discarded() || !j.is_array())
      bad_request("the file starts with '[' but is not one valid JSON array of examples", "file", "invalid_file_format");
    for (size_t i = 0; i < j.size(); ++i)
      if (!j[i].is_object())
        bad_request("example " + std::to_string(i) + " of the array is not a JSON object", "file", "invalid_file_format");
    return;
  }
  size_t line_no = 0, pos = 0, examples = 0;
  while (pos <= bytes.size()) {
    size_t end = bytes.find('\n', pos);
    if (end == std::string::npos) end = bytes.size();
    ++line_no;
    const std::string line = bytes.substr(pos, end - pos);
    if (line.find_first_not_of(" \t\r") != std::string::npos) {
      nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
      if (j.is_discarded() || !j.is_object())
        bad_request("line " + std::to_string(line_no) + " is not a JSON object: each line must be one example such as "
                    "{\"text\": ...}, {\"prompt\": ..., \"completion\": ...} or {\"messages\": [...]}",
                    "file", "invalid_file_format");
      ++examples;
    }
    pos = end + 1;
  }
  if (examples == 0) bad_request("the file holds no example", "file", "invalid_file_format");
}

void check_training_file(const std::string& purpose, const std::string& bytes) {
  if (purpose != "fine-tune")
    bad_request("purpose must be 'fine-tune' (the only kind of file this server keeps)", "purpose", "invalid_value");
  check_training_data(bytes);
}

FileStore::FileStore(const std::string& dir, int max_files) : dir_(dir), max_files_(max_files) {
  make_dirs(dir_);  // durable: an upload promised inside must not vanish with its folder
  for (const fs::directory_entry& e : fs::directory_iterator(dir_)) {
    const fs::path p = e.path();
    if (p.extension() != ".json" || !well_formed_id(p.stem().string(), "file-")) continue;
    if (!fs::exists(fs::path(dir_) / (p.stem().string() + ".jsonl"))) continue;  // killed between the two writes
    nlohmann::json rec = nlohmann::json::parse(read_file(p.string()), nullptr, false);
    if (rec.is_discarded() || !rec.is_object()) fail(p.string(), "a file record is not valid JSON", "remove it");
    records_[p.stem().string()] = rec;
  }
}

nlohmann::json FileStore::add(const std::string& filename, const std::string& purpose, const std::string& bytes) {
  check_training_file(purpose, bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int>(records_.size()) >= max_files_)
      bad_request("this server keeps at most " + std::to_string(max_files_) + " files", "file", "too_many_files");
  }
  const std::string id = random_id("file-");
  nlohmann::json rec = {{"id", id},           {"object", "file"},          {"bytes", bytes.size()},
                        {"created_at", unix_now()}, {"filename", filename}, {"purpose", purpose},
                        {"status", "processed"}, {"status_details", nullptr}};
  // The data first, then the record that makes it visible: a kill between leaves no record.
  write_file_atomic((fs::path(dir_) / (id + ".jsonl")).string(), bytes);
  write_file_atomic((fs::path(dir_) / (id + ".json")).string(), rec.dump(2) + "\n");
  std::lock_guard<std::mutex> lock(mu_);
  records_[id] = rec;
  return rec;
}

nlohmann::json FileStore::get(const std::string& id, const std::string& param) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = records_.find(id);
  if (it == records_.end()) not_found("No such file: '" + id + "'", param, "file_not_found");
  return it->second;
}

std::vector<nlohmann::json> FileStore::list() const {
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<nlohmann::json> out;
  for (const auto& [id, rec] : records_) out.push_back(rec);
  return out;
}

std::string FileStore::data_path(const std::string& id, const std::string& param) const {
  get(id, param);  // only ids this store made and recorded
  return (fs::path(dir_) / (id + ".jsonl")).string();
}

}  // namespace nl::serve
