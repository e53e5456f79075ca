#include "nightlora/train/resident_model.h"

namespace nl {

ResidentModel::ResidentModel(const std::string& path, const EngineOptions& opt)
    : path_(path), model_(Model::load(path)), engine_(make_engine(*model_, opt)) {}

}  // namespace nl
