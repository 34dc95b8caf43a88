// The Python part of Jupyter's config that `lathe __notebook` writes
// (notebook_prelude.h, step 5): what JSON cannot say; and the page template
// that keeps the token out of jupyter-notebook's pages.
#include <string>

#include "lathe/run/notebook_prelude.h"

namespace lathe::run {
namespace {

// Kernels on unix sockets (ipc) named <runtime>/k<N>-<port>. Jupyter's own
// ipc names carry the kernel's 36-character id and would pass the 107 bytes
// of a socket's path under a long run directory; <N> is a number this
// server has not used, and no file of a previous attempt starts with it.
// The KernelManager classes Jupyter would use, with that name as the
// default `ip` of an ipc kernel, are registered as a module of their own so
// that `kernel_manager_class` can name them.
constexpr char kKernelsPy[] = R"py(
import glob
import itertools
import os
import sys
import types

from jupyter_client.ioloop import AsyncIOLoopKernelManager, IOLoopKernelManager

_RUNTIME = os.environ["JUPYTER_RUNTIME_DIR"]
_MAX_SOCKET_PATH = 107  # a unix socket's path, less its NUL
_numbers = itertools.count(1)


def _ipc_prefix():
    while True:
        prefix = os.path.join(_RUNTIME, "k%d" % next(_numbers))
        if len(prefix) + 2 > _MAX_SOCKET_PATH:
            raise RuntimeError("a kernel's socket %s-1 would be longer than %d bytes"
                               % (prefix, _MAX_SOCKET_PATH))
        if not glob.glob(glob.escape(prefix) + "-*"):
            return prefix


def _short_ipc(base):
    class KernelManager(base):
        def _ip_default(self):
            return _ipc_prefix() if self.transport == "ipc" else super()._ip_default()

    KernelManager.__name__ = KernelManager.__qualname__ = base.__name__
    return KernelManager


_async_base = AsyncIOLoopKernelManager
if _SERVER:
    try:  # jupyter_server 2's own
        from jupyter_server.services.kernels.kernelmanager import ServerKernelManager as _async_base
    except ImportError:
        pass
_kernels = types.ModuleType("lathe_notebook_kernels")
_kernels.KernelManager = _short_ipc(IOLoopKernelManager)
_kernels.AsyncKernelManager = _short_ipc(_async_base)
sys.modules[_kernels.__name__] = _kernels
c.MappingKernelManager.kernel_manager_class = "lathe_notebook_kernels.KernelManager"
c.AsyncMappingKernelManager.kernel_manager_class = "lathe_notebook_kernels.AsyncKernelManager"
)py";

// jupyter-notebook 6 renders its token into every page (page.html: the
// body's data-jupyter-api-token, the logo's ?token= link), where any script
// on the notebook's origin reads it. The proxy shows the token to Jupyter
// itself, so the pages need none: Jupyter finds our page.html first, which
// empties `token` and extends its own (found as templates/page.html under
// the notebook package's directory).
constexpr char kTemplatesPy[] = R"py(
import notebook as _notebook

c.NotebookApp.extra_template_paths = [
    os.path.join(os.environ["JUPYTER_CONFIG_DIR"], "templates"),
    os.path.dirname(_notebook.__file__),
]
)py";

}  // namespace

// ipykernel's IOPub thread listens on a random 127.0.0.1 port for the output
// of the kernel's forked children (a PULL socket: it reads nothing out, and
// drops what lacks its random key, but any local user can connect). IPython
// reads this file before the kernel makes its sockets: the pipe becomes a
// unix socket <runtime>/p<pid> in the same directory as the kernel's own.
const char kIpythonKernelConfig[] = R"py(# Written by `lathe __notebook` for this notebook alone.
import os

import zmq
from ipykernel import iostream

_RUNTIME = os.environ.get("JUPYTER_RUNTIME_DIR", "")


def _pipe_in(self):
    self._pipe_uuid = os.urandom(16)
    pipe_in = self.socket.context.socket(zmq.PULL)
    pipe_in.linger = 0
    self._pipe_port = os.path.join(_RUNTIME, "p%d" % os.getpid())
    try:
        pipe_in.bind("ipc://" + self._pipe_port)
    except zmq.ZMQError:
        self._pipe_flag = False  # as ipykernel does: no output from forked children
        pipe_in.close()
        return
    self._pipe_in = iostream.ZMQStream(pipe_in, self.io_loop)
    self._pipe_in.on_recv(self._handle_pipe_msg)


def _pipe_out(self):
    ctx = zmq.Context()
    pipe_out = ctx.socket(zmq.PUSH)
    pipe_out.linger = 3000
    pipe_out.connect("ipc://" + self._pipe_port)
    return ctx, pipe_out


if _RUNTIME and hasattr(iostream.IOPubThread, "_setup_pipe_in"):
    iostream.IOPubThread._setup_pipe_in = _pipe_in
    iostream.IOPubThread._setup_pipe_out = _pipe_out
)py";

const char kTokenlessPage[] =
    "{#- Written by `lathe __notebook`: Jupyter's own page, without its token. -#}\n"
    "{%- set token = \"\" -%}\n"
    "{%- extends \"templates/page.html\" -%}\n";

std::string JupyterPyConfig(bool notebook6) {
  std::string out =
      "# Written by `lathe __notebook` for this notebook alone (docs/notebooks.md).\n"
      "c = get_config()  # noqa: F821 (defined by Jupyter's config loader)\n";
  out += notebook6 ? "_SERVER = False\n" : "_SERVER = True\n";
  out += kKernelsPy;
  if (notebook6) out += kTemplatesPy;
  return out;
}

}  // namespace lathe::run
