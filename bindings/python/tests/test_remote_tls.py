"""TLS of remote shards: a local HTTPS server (Python's ssl module, in a
process of its own) whose self-signed certificate for 127.0.0.1 the test
makes (with the cryptography package, else the openssl command).

What is checked: without a CA bundle the start fails, and the message holds
curl's own detail of the certificate's problem; the bundle named by
SSL_CERT_FILE, CURL_CA_BUNDLE or AWS_CA_BUNDLE makes the same shards read as
on local disk, the first of AWS_CA_BUNDLE, CURL_CA_BUNDLE, SSL_CERT_FILE
winning over the others; a folder of hashed certificates in SSL_CERT_DIR
works too; a bundle that cannot be read is an error that names its variable.
"""

import datetime
import ipaddress
import os
import shutil
import subprocess
import sys

import pytest

import rfhelpers
import rfservers
import ringfeed

OPTS = dict(batch_size=4, image_size=24, transform="center", num_workers=1)
CA_VARS = ("AWS_CA_BUNDLE", "CURL_CA_BUNDLE", "SSL_CERT_FILE", "SSL_CERT_DIR")

SERVER = r"""
import functools, http.server, ssl, sys
port, root, cert, key = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=root)
srv = http.server.ThreadingHTTPServer(("127.0.0.1", port), h)
ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
ctx.load_cert_chain(cert, key)
srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
srv.serve_forever()
"""


def _self_signed(folder, name):
    """A self-signed certificate for 127.0.0.1 (a CA of its own) and its
    key, as PEM files in folder: (cert, key)."""
    cert, key = os.path.join(folder, name + ".pem"), os.path.join(folder, name + ".key")
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        if not shutil.which("openssl"):
            pytest.skip("neither the cryptography package nor the openssl command")
        subprocess.run(["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt",
                        "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key, "-out", cert,
                        "-days", "2", "-subj", "/CN=127.0.0.1",
                        "-addext", "subjectAltName=IP:127.0.0.1"],
                       check=True, capture_output=True)
        return cert, key
    k = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1 " + name)])
    now = datetime.datetime.now(datetime.timezone.utc)
    c = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject)
         .public_key(k.public_key()).serial_number(x509.random_serial_number())
         .not_valid_before(now - datetime.timedelta(days=1))
         .not_valid_after(now + datetime.timedelta(days=2))
         .add_extension(x509.SubjectAlternativeName(
             [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
         .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
         .sign(k, hashes.SHA256()))
    with open(cert, "wb") as f:
        f.write(c.public_bytes(serialization.Encoding.PEM))
    with open(key, "wb") as f:
        f.write(k.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                serialization.NoEncryption()))
    return cert, key


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    rfhelpers.write_cls_shard(str(d / "train-0000.tar"), ["t%03d" % i for i in range(8)], 30, 26,
                              900, [i % 2 for i in range(8)])
    cert, key = _self_signed(str(d), "server")
    other, _ = _self_signed(str(d), "other")
    port = rfservers.free_port()
    with rfservers._process([sys.executable, "-c", SERVER, str(port), str(d), cert, key], port):
        yield dict(url="https://127.0.0.1:%d/train-0000.tar" % port, cert=cert, other=other,
                   dir=str(d), local=str(d / "train-0000.tar"))


def _epoch(src, **kw):
    with ringfeed.Loader(src, **dict(OPTS, **kw)) as ld:
        return [rfhelpers.batch_digest(x, l) for x, l in ld]


@pytest.fixture
def no_ca(monkeypatch):
    for v in CA_VARS:
        monkeypatch.delenv(v, raising=False)
    return monkeypatch


def test_self_signed_refused_without_a_bundle(site, no_ca, tmp_path):
    with pytest.raises(ringfeed.RingfeedError) as e:
        _epoch(site["url"], cache_dir=str(tmp_path / "c"), fetch_retries=0)
    msg = str(e.value)
    # curl's words, then its own detail
    assert "HEAD %s" % site["url"] in msg and "SSL certificate problem: " in msg, msg


@pytest.mark.parametrize("chosen,others", [
    ("SSL_CERT_FILE", ()),
    ("CURL_CA_BUNDLE", ("SSL_CERT_FILE",)),
    ("AWS_CA_BUNDLE", ("CURL_CA_BUNDLE", "SSL_CERT_FILE")),
])
def test_bundle_variables_in_order(site, no_ca, tmp_path, chosen, others):
    """The chosen variable names the server's certificate; the ones after it
    in the order name another: the chosen one wins."""
    no_ca.setenv(chosen, site["cert"])
    for v in others:
        no_ca.setenv(v, site["other"])
    assert _epoch(site["url"], cache_dir=str(tmp_path / "c")) == _epoch(site["local"])
    # and the other way round: the first names the wrong one, so it fails
    if others:
        no_ca.setenv(chosen, site["other"])
        no_ca.setenv(others[0], site["cert"])
        with pytest.raises(ringfeed.RingfeedError, match="certificate"):
            _epoch(site["url"], cache_dir=str(tmp_path / "c"), fetch_retries=0)


def test_cert_dir(site, no_ca, tmp_path):
    if not shutil.which("openssl"):
        pytest.skip("the openssl command names hashed certificates")
    h = subprocess.run(["openssl", "x509", "-hash", "-noout", "-in", site["cert"]],
                       check=True, capture_output=True, text=True).stdout.strip()
    d = tmp_path / "certs"
    d.mkdir()
    shutil.copy(site["cert"], str(d / (h + ".0")))
    no_ca.setenv("SSL_CERT_DIR", str(d))
    assert _epoch(site["url"], cache_dir=str(tmp_path / "c")) == _epoch(site["local"])


def test_unreadable_bundle_is_an_error(site, no_ca, tmp_path):
    no_ca.setenv("AWS_CA_BUNDLE", str(tmp_path / "absent.pem"))
    with pytest.raises(ringfeed.RingfeedError,
                       match=r"the CA bundle AWS_CA_BUNDLE=.*absent.pem cannot be read"):
        _epoch(site["url"], cache_dir=str(tmp_path / "c"))
