// What `lathe login` keeps: the daemon a CLI talks to over TCP and the token
// it authenticates with, in $XDG_CONFIG_HOME/lathe/credentials (default
// ~/.config/lathe/credentials), JSON {"url": …, "token": …[, "ca": …]}, mode 0600 in a
// directory of mode 0700. A file that others may read is refused, since it
// holds a token (as ssh refuses a private key others can read).
#pragma once

#include <optional>
#include <string>

#include "lathe/common/status.h"

namespace lathe::api {

struct Credentials {
  std::string url;      // "http://HOST:PORT" or "https://HOST:PORT"
  std::string token;    // a per-user token, or a daemon's own
  std::string ca_file;  // `lathe login --ca`: https is verified with this CA only; "": the system's
};

// The file's path for this process ($XDG_CONFIG_HOME when absolute, else
// $HOME/.config, else the passwd entry's home).
std::string CredentialsPath();
// The user's own configuration directory: $XDG_CONFIG_HOME/lathe when that
// is absolute, else $HOME/.config/lathe, else the passwd entry's home's.
std::string ConfigDir();
// The project a user's new runs, notebooks and deployments belong to when
// they name none: $LATHE_PROJECT (set and empty: none), else `project: NAME`
// in ConfigDir()/config.yaml; "" when neither says.
std::string DefaultProject();

// nullopt when there is none. credentials.mode when the file is readable or
// writable by others; credentials.bad when it is not what `lathe login` wrote.
Result<std::optional<Credentials>> LoadCredentials();
// Writes the file (atomically, 0600), creating the directory 0700.
Status SaveCredentials(const Credentials& c);
// Removes the file; false when there was none.
Result<bool> RemoveCredentials();

// A daemon address as `lathe login` takes it.
struct DaemonUrl {
  std::string host;  // "127.0.0.1", "gpu1.lab", "::1"
  int port = 0;
  bool tls = false;         // https://
  std::string Url() const;  // "http[s]://HOST:PORT" (IPv6 in brackets)
  bool loopback() const;    // localhost, 127.0.0.0/8, ::1
};
// http[s]://HOST:PORT[/]: login.bad_url (InvalidArgument) for anything else.
Result<DaemonUrl> ParseDaemonUrl(const std::string& url);

}  // namespace lathe::api
