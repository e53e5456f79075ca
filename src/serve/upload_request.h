// The fields of POST /v1/files, as cpp-httplib parsed its multipart form: 'file' (its bytes and
// filename) and 'purpose'. The bytes are then checked by check_training_file (file_store.h)
// before FileStore::add keeps them. The fuzz target fuzz/serve_request_fuzz.cpp calls both.
#pragma once
#include <cstddef>
#include <string>

#include <httplib.h>

namespace nl::serve {

struct Upload {
  std::string filename;  // the client's name for it: a label, never a path
  std::string purpose;   // "" when the form has none
  std::string content;
};

// 400 when the request is not a multipart form with a 'file' field; 413 when the file has
// more than max_upload_bytes.
Upload read_upload(const httplib::Request& req, size_t max_upload_bytes);

}  // namespace nl::serve
