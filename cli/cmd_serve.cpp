// `nightlora serve ARGS...`: runs the executable nightlora-serve (cli/serve/) with ARGS, in
// this process's place (command_program.h: execv, found beside nightlora, then on PATH). The
// server is its own executable so that its HTTP stack (Debian's libcpp-httplib, which loads
// OpenSSL, zlib and brotli) is loaded by the server alone, not at every start of the other
// commands (~10 ms each: docs/performance/startup-2026-12-06-zen5.md). Its options, --help
// and "did you mean" are nightlora-serve's (cli/serve/cmd_serve.cpp, the one definition).
#include "command.h"
#include "serve/serve_program.h"

namespace {

#if NL_HAVE_SERVE
constexpr bool kServeBuilt = true;
constexpr char kServeHowTo[] =
    "build the target nightlora_serve (nightlora_cli's build makes it; it needs Debian's libcpp-httplib-dev: "
    "scripts/setup.sh) or install it beside nightlora (`cmake --install` installs both)";
#else
constexpr bool kServeBuilt = false;
constexpr char kServeHowTo[] =
    "the server needs Debian's libcpp-httplib-dev: install it (scripts/setup.sh) and build again; a "
    "cross-compiled build (the static arm64 phone binary) has no HTTP server";
#endif

nlcli::Register reg_serve("serve", nlcli::kServeHelp, nlcli::CommandProgram{nlcli::kServeProgramFile, kServeBuilt, kServeHowTo});

}  // namespace
