#include "serve/upload_request.h"

#include "serve/api_error.h"

namespace nl::serve {

Upload read_upload(const httplib::Request& req, size_t max_upload_bytes) {
  if (!req.is_multipart_form_data() || !req.has_file("file"))
    bad_request("upload the file as multipart/form-data with fields 'file' and 'purpose'", "file",
                "missing_required_parameter");
  const httplib::MultipartFormData file = req.get_file_value("file");
  if (file.content.size() > max_upload_bytes)
    throw ApiError(413, "invalid_request_error",
                   "the file has " + std::to_string(file.content.size()) + " bytes; this server takes at most " +
                       std::to_string(max_upload_bytes),
                   "file", "file_too_large");
  Upload u;
  u.filename = file.filename;
  u.purpose = req.has_file("purpose") ? req.get_file_value("purpose").content : "";
  u.content = file.content;
  return u;
}

}  // namespace nl::serve
