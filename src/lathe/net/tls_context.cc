#include "lathe/net/tls_context.h"

#include <boost/asio/buffer.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/system/error_code.hpp>
#include <exception>
#include <string>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include "lathe/os/files.h"

namespace lathe::net {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;

constexpr size_t kMaxPemBytes = 1 << 20;  // a certificate chain or a key file

// asio takes OpenSSL's error off its queue into `ec`.
std::string OpenSslError(const error_code& ec) {
  ERR_clear_error();
  if (ec.value() == 0) return "not valid PEM";
  return ec.message();
}

Result<std::string> ReadPem(const std::string& path, const char* setting) {
  auto text = os::ReadFileUpTo(path, kMaxPemBytes);
  if (!text.ok()) {
    return Status::Msg(Code::kInvalidArgument, "tls.unreadable",
                       {{"setting", setting}, {"file", path}, {"error", text.status().message()}});
  }
  return text;
}

}  // namespace

Result<std::unique_ptr<asio::ssl::context>> MakeTlsContext(const TlsFiles& files) {
  ASSIGN_OR_RETURN(std::string cert, ReadPem(files.cert_file, "tls.cert"));
  ASSIGN_OR_RETURN(std::string key, ReadPem(files.key_file, "tls.key"));
  auto bad = [](const char* setting, const std::string& file, const std::string& error) {
    return Status::Msg(Code::kInvalidArgument, "tls.bad_file",
                       {{"setting", setting}, {"file", file}, {"error", error}});
  };
  try {
    auto ctx = std::make_unique<asio::ssl::context>(asio::ssl::context::tls_server);
    ctx->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_compression |
                     asio::ssl::context::single_dh_use);
    SSL_CTX_set_min_proto_version(ctx->native_handle(), TLS1_2_VERSION);
    ERR_clear_error();
    error_code ec;
    ctx->use_certificate_chain(asio::buffer(cert), ec);
    if (ec) return bad("tls.cert", files.cert_file, OpenSslError(ec));
    ctx->use_private_key(asio::buffer(key), asio::ssl::context::pem, ec);
    bool mismatch = ec && ERR_GET_REASON(static_cast<unsigned long>(ec.value())) ==  // NOLINT
                              X509_R_KEY_VALUES_MISMATCH;
    if (ec && !mismatch) return bad("tls.key", files.key_file, OpenSslError(ec));
    if (mismatch || SSL_CTX_check_private_key(ctx->native_handle()) != 1) {
      ERR_clear_error();
      return Status::Msg(Code::kInvalidArgument, "tls.key_mismatch",
                         {{"cert", files.cert_file}, {"key", files.key_file}});
    }
    return ctx;
  } catch (const std::exception& e) {  // context creation
    return Status::Internal(std::string("TLS context: ") + e.what());
  }
}

}  // namespace lathe::net
