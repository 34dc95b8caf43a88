// The TLS side of HttpServer::ListenTls: the server's certificate and key,
// read once into an OpenSSL context when a TLS listener opens.
//
// Private to the net module: only its own .cc files include this header.
// It names asio's context without including Asio, so including it is cheap.
#pragma once

#include <memory>

#include "lathe/common/status.h"
#include "lathe/net/http_server.h"

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace lathe::net {

// TLS 1.2 and later, OpenSSL's default ciphers for them; no client
// certificates. Errors (catalog ids, each naming the file and its setting):
// tls.unreadable (a file that cannot be read), tls.bad_file (not PEM, or
// not a certificate / key), tls.key_mismatch (the key is not the
// certificate's); Internal when OpenSSL cannot make a context at all.
Result<std::unique_ptr<boost::asio::ssl::context>> MakeTlsContext(const TlsFiles& files);

}  // namespace lathe::net
