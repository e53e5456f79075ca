// What nightlora (cli/cmd_serve.cpp) and nightlora-serve (cli/serve/cmd_serve.cpp) both say
// of `serve`: the executable's file name and the line `nightlora --help` lists.
#pragma once

namespace nlcli {

// CMakeLists.txt's nightlora_serve target writes this file beside nightlora.
inline constexpr char kServeProgramFile[] = "nightlora-serve";

inline constexpr char kServeHelp[] =
    "Serve the model and its adapters over the OpenAI API (chat, completions, files, fine-tuning jobs)";

}  // namespace nlcli
