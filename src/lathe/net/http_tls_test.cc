// TLS: HttpServer::ListenTls and HttpClient's https:// verification, with a CA
// and certificates made by the openssl command at test time.
#include <gtest/gtest.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "lathe/net/http_client.h"
#include "lathe/net/http_server.h"
#include "lathe/net/test_util/raw_conn.h"

namespace lathe::net {
namespace {

using testing::RawConn;

// A CA, a server certificate it signed for IP 127.0.0.1 and DNS lathe.test,
// and a second CA that signed nothing of ours. EC keys: quick to make.
class TlsFixture : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    char tmpl[] = "/tmp/lathe-tls-XXXXXX";
    dir_ = new std::string(::mkdtemp(tmpl));
    std::string script = "set -e; cd " + *dir_ +
                         "; k() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 "
                         "-out $1 2>/dev/null; }"
                         "; k ca.key; k other.key; k server.key"
                         "; openssl req -x509 -new -key ca.key -subj /CN=TestCA -days 2 -out ca.pem"
                         "; openssl req -x509 -new -key other.key -subj /CN=Other -days 2 "
                         "-out other.pem"
                         "; openssl req -new -key server.key -subj /CN=server -out server.csr"
                         "; printf 'subjectAltName=IP:127.0.0.1,DNS:lathe.test\\n' > ext"
                         "; openssl x509 -req -in server.csr -CA ca.pem -CAkey ca.key "
                         "-CAcreateserial -days 2 -extfile ext -out server.pem 2>/dev/null";
    ok_ = std::system(("sh -c '" + Escape(script) + "'").c_str()) == 0;
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(*dir_);
    delete dir_;
  }
  void SetUp() override {
    if (!ok_) GTEST_SKIP() << "the openssl command could not make test certificates";
  }
  static std::string Escape(const std::string& s) {
    std::string out;
    for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    return out;
  }
  static std::string Path(const std::string& name) { return *dir_ + "/" + name; }
  static TlsFiles Files() { return {Path("server.pem"), Path("server.key")}; }

  // A TLS server answering "hello <path>"; returns its port.
  int Start(Handler handler = {}) {
    if (!handler) {
      handler = [](HttpRequest req, std::unique_ptr<Responder> r) {
        r->Send(HttpResponse{200, "text/plain", {}, "hello " + req.path});
      };
    }
    auto s = HttpServer::Create({}, std::move(handler));
    EXPECT_TRUE(s.ok());
    server_ = std::move(*s);
    auto port = server_->ListenTls("127.0.0.1", 0, Files());
    EXPECT_TRUE(port.ok()) << port.status().ToString();
    EXPECT_TRUE(server_->Start().ok());
    return port.ok() ? *port : 0;
  }

  static HttpClient Client(const std::string& url, const std::string& ca) {
    ClientOptions o;
    o.base_url = url;
    o.ca_file = ca;
    o.timeout_ms = 20000;
    return HttpClient(o);
  }

  static inline std::string* dir_ = nullptr;
  static inline bool ok_ = false;
  std::unique_ptr<HttpServer> server_;
};

std::string Url(const std::string& host, int port) {
  return "https://" + host + ":" + std::to_string(port);
}

TEST_F(TlsFixture, ClientTrustingTheCaGetsAnswersOnOneConnection) {
  int port = Start();
  HttpClient c = Client(Url("127.0.0.1", port), Path("ca.pem"));
  for (std::string path : {"/one", "/two"}) {
    auto r = c.Request("GET", path);
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->status, 200);
    EXPECT_EQ(r->body, "hello " + path);
  }
  EXPECT_EQ(server_->active_connections(), 1u);  // kept alive over TLS
  std::string streamed;
  auto st = c.Stream("GET", "/s", [&](std::string_view d) {
    streamed.append(d);
    return true;
  });
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(streamed, "hello /s");
}

TEST_F(TlsFixture, UntrustedCertificateIsFailedPreconditionNamingCa) {
  int port = Start();
  // The system's CAs do not include the test CA.
  auto r = Client(Url("127.0.0.1", port), "").Request("GET", "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), Code::kFailedPrecondition) << r.status().ToString();
  EXPECT_EQ(r.status().msg_id(), "tls.untrusted");
  EXPECT_NE(r.status().message().find("--ca"), std::string::npos) << r.status().message();
  // Another CA: not trusted either.
  auto other = Client(Url("127.0.0.1", port), Path("other.pem")).Request("GET", "/");
  ASSERT_FALSE(other.ok());
  EXPECT_EQ(other.status().msg_id(), "tls.untrusted_ca") << other.status().ToString();
}

TEST_F(TlsFixture, HostNameIsVerified) {
  int port = Start();
  // Signed by the trusted CA, but for 127.0.0.1 and lathe.test, not localhost.
  auto r = Client(Url("localhost", port), Path("ca.pem")).Request("GET", "/");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().msg_id(), "tls.untrusted_ca") << r.status().ToString();
}

TEST_F(TlsFixture, PlainHttpToTheTlsPortGetsNoAnswer) {
  int port = Start();
  ClientOptions o;
  o.base_url = "http://127.0.0.1:" + std::to_string(port);
  o.timeout_ms = 20000;
  auto r = HttpClient(o).Request("GET", "/");
  EXPECT_FALSE(r.ok() && r->status == 200);
  RawConn raw = RawConn::Tcp(port);
  ASSERT_TRUE(raw.Send("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::string got;
  EXPECT_TRUE(raw.WaitClosed(20000, &got));
  EXPECT_EQ(got.find("hello"), std::string::npos);
}

TEST_F(TlsFixture, BadFilesAreErrorsNamingTheFileAndSetting) {
  auto s = HttpServer::Create({}, [](HttpRequest, std::unique_ptr<Responder>) {});
  ASSERT_TRUE(s.ok());
  auto missing = (*s)->ListenTls("127.0.0.1", 0, {Path("nope.pem"), Path("server.key")});
  ASSERT_FALSE(missing.ok());
  EXPECT_TRUE(missing.status().IsInvalidArgument());
  EXPECT_EQ(missing.status().msg_id(), "tls.unreadable");
  EXPECT_NE(missing.status().message().find(Path("nope.pem")), std::string::npos);
  EXPECT_NE(missing.status().message().find("tls.cert"), std::string::npos);

  auto not_pem = (*s)->ListenTls("127.0.0.1", 0, {Path("ext"), Path("server.key")});
  ASSERT_FALSE(not_pem.ok());
  EXPECT_EQ(not_pem.status().msg_id(), "tls.bad_file");
  EXPECT_NE(not_pem.status().message().find(Path("ext")), std::string::npos);

  auto bad_key = (*s)->ListenTls("127.0.0.1", 0, {Path("server.pem"), Path("ca.pem")});
  ASSERT_FALSE(bad_key.ok());
  EXPECT_EQ(bad_key.status().msg_id(), "tls.bad_file");
  EXPECT_NE(bad_key.status().message().find("tls.key"), std::string::npos);

  auto mismatch = (*s)->ListenTls("127.0.0.1", 0, {Path("server.pem"), Path("other.key")});
  ASSERT_FALSE(mismatch.ok());
  EXPECT_EQ(mismatch.status().msg_id(), "tls.key_mismatch") << mismatch.status().ToString();
}

// A blocking OpenSSL client over a RawConn's socket, trusting ca.pem.
class TlsClientConn {
 public:
  TlsClientConn(int port, const std::string& ca) : raw_(RawConn::Tcp(port)) {
    ctx_ = SSL_CTX_new(TLS_client_method());
    SSL_CTX_load_verify_locations(ctx_, ca.c_str(), nullptr);
    SSL_CTX_set_verify(ctx_, SSL_VERIFY_PEER, nullptr);
    ssl_ = SSL_new(ctx_);
    SSL_set_fd(ssl_, raw_.fd());
    ok_ = raw_.connected() && SSL_connect(ssl_) == 1;
  }
  ~TlsClientConn() {
    SSL_free(ssl_);
    SSL_CTX_free(ctx_);
  }
  bool ok() const { return ok_; }
  bool Send(std::string_view d) {
    return SSL_write(ssl_, d.data(), static_cast<int>(d.size())) == static_cast<int>(d.size());
  }
  // Reads until `n` bytes arrived or the stream ended.
  std::string Read(size_t n) {
    std::string out;
    char buf[16384];
    while (out.size() < n) {
      int r = SSL_read(ssl_, buf, static_cast<int>(std::min(sizeof(buf), n - out.size())));
      if (r <= 0) break;
      out.append(buf, static_cast<size_t>(r));
    }
    return out;
  }
  // Reads the response head (through the blank line) byte by byte.
  std::string ReadHead() {
    std::string out;
    while (out.size() < 4 || out.substr(out.size() - 4) != "\r\n\r\n") {
      std::string c = Read(1);
      if (c.empty()) break;
      out += c;
    }
    return out;
  }
  // True when the server ended the TLS stream (close_notify or EOF).
  bool Ended() {
    char c;
    return SSL_read(ssl_, &c, 1) <= 0;
  }

 private:
  RawConn raw_;
  SSL_CTX* ctx_ = nullptr;
  SSL* ssl_ = nullptr;
  bool ok_ = false;
};

TEST_F(TlsFixture, TunnelOverTls) {
  int sv[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
  RawConn up = RawConn::Adopt(sv[1]);
  int port = Start([fd = sv[0]](HttpRequest, std::unique_ptr<Responder> r) {
    HttpResponse head;
    head.status = 101;
    head.headers = {{"Upgrade", "websocket"}, {"Connection", "Upgrade"}};
    r->Tunnel(std::move(head), fd, "left ");
  });
  TlsClientConn c(port, Path("ca.pem"));
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.Send("GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\nearly"));
  std::string head = c.ReadHead();
  EXPECT_EQ(head.rfind("HTTP/1.1 101", 0), 0u) << head;
  EXPECT_EQ(c.Read(5), "left ");
  EXPECT_EQ(up.Read(5).value_or("?"), "early");
  std::string big(2 << 20, 'u');
  std::thread writer([&] { EXPECT_TRUE(up.Send(big)); });
  EXPECT_EQ(c.Read(big.size()).size(), big.size());
  writer.join();
  ASSERT_TRUE(c.Send("from client"));
  EXPECT_EQ(up.Read(11).value_or("?"), "from client");
  up.Close();  // the upstream hangs up: the client's TLS stream ends
  EXPECT_TRUE(c.Ended());
}

}  // namespace
}  // namespace lathe::net
