import { KeyObject } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { isIP } from "node:net";
import { dirname, join } from "node:path";

/** The pair's file names in --cert-dir: <dir>/kube-volume-controller.{crt,key} (KCM's PairName is its own name). */
export const PAIR_NAME = "kube-volume-controller";

export interface ServingCertOptions {
  bindAddress: string;
  certDir: string;
  certFile: string;
  keyFile: string;
}

export interface ServingCert {
  cert: string;
  key: string;
  /** Where it came from, for the start-up log. */
  source: string;
  /** The files it was read from, reloaded when they change (a rotated certificate); none when generated in memory. */
  files?: { cert: string; key: string };
}

/**
 * The serving certificate as apiserver's SecureServingOptions.MaybeDefaultWithSelfSignedCerts chooses
 * it for kube-controller-manager: --tls-cert-file/--tls-private-key-file when given (both, or an
 * error); else <cert-dir>/<pair>.crt/.key when both can be read; else a new self-signed one, written
 * there when --cert-dir is set and kept in memory when not (KCM's default). Throws one sentence
 * naming the flag when a file cannot be read.
 */
export async function servingCert(opts: ServingCertOptions): Promise<ServingCert> {
  if (opts.certFile !== "" || opts.keyFile !== "") {
    if (opts.certFile === "") throw new Error("--tls-cert-file: required with --tls-private-key-file");
    if (opts.keyFile === "") throw new Error("--tls-private-key-file: required with --tls-cert-file");
    return {
      cert: readPem("--tls-cert-file", opts.certFile),
      key: readPem("--tls-private-key-file", opts.keyFile),
      source: opts.certFile,
      files: { cert: opts.certFile, key: opts.keyFile },
    };
  }
  const certFile = opts.certDir && join(opts.certDir, `${PAIR_NAME}.crt`);
  const keyFile = opts.certDir && join(opts.certDir, `${PAIR_NAME}.key`);
  if (certFile && keyFile && existsSync(certFile) !== existsSync(keyFile)) {
    // upstream's CanReadCertAndKey: one of the pair alone is an error, never silently replaced
    const [present, missing] = existsSync(certFile) ? [certFile, keyFile] : [keyFile, certFile];
    throw new Error(`--cert-dir: ${present} exists but ${missing} does not`);
  }
  if (certFile && keyFile && existsSync(certFile)) {
    return {
      cert: readPem("--cert-dir", certFile),
      key: readPem("--cert-dir", keyFile),
      source: certFile,
      files: { cert: certFile, key: keyFile },
    };
  }
  // As upstream: the public address "localhost" and 127.0.0.1, plus the bind address when specific.
  const unspecified = opts.bindAddress === "" || opts.bindAddress === "0.0.0.0" || opts.bindAddress === "::";
  const generated = await selfSignedCertKey("localhost", {
    ips: ["127.0.0.1", ...(unspecified ? [] : [opts.bindAddress])],
    dns: unspecified ? ["localhost"] : [],
  });
  if (certFile && keyFile) {
    try {
      mkdirSync(dirname(certFile), { recursive: true, mode: 0o755 });
      writeFileSync(certFile, generated.cert, { mode: 0o644 });
      writeFileSync(keyFile, generated.key, { mode: 0o600 });
    } catch (err) {
      throw new Error(`--cert-dir: ${(err as Error).message}`, { cause: err });
    }
    return {
      ...generated,
      source: `generated self-signed ${certFile}`,
      files: { cert: certFile, key: keyFile },
    };
  }
  return { ...generated, source: "generated self-signed in memory" };
}

function readPem(flag: string, path: string): string {
  try {
    return readFileSync(path, "utf8");
  } catch (err) {
    throw new Error(`${flag}: ${(err as Error).message}`, { cause: err });
  }
}

/** A year, as upstream's self-signed serving certificates. */
const MAX_AGE_MS = 365 * 24 * 3600_000;

/**
 * client-go's cert.GenerateSelfSignedCertKey: a CA named <host>-ca@<unix time> signing a serving
 * certificate <host>@<unix time> for `host` and the alternates, valid from an hour ago for a year; the
 * PEM holds the serving certificate followed by the CA. ECDSA P-256 rather than upstream's RSA 2048:
 * every TLS client takes it, and it is generated in milliseconds. Node's crypto can parse
 * certificates but not create them, hence @peculiar/x509 (loaded only when a certificate is made).
 */
export async function selfSignedCertKey(
  host: string,
  alternates: { ips: readonly string[]; dns: readonly string[] },
): Promise<{ cert: string; key: string }> {
  await import("reflect-metadata"); // @peculiar/x509's dependency injection needs the polyfill
  const x509 = await import("@peculiar/x509");
  const alg = { name: "ECDSA", namedCurve: "P-256", hash: "SHA-256" };
  const notBefore = new Date(Date.now() - 3600_000);
  const notAfter = new Date(notBefore.getTime() + MAX_AGE_MS);
  const unix = Math.floor(Date.now() / 1000);
  const serial = () =>
    Buffer.from(crypto.getRandomValues(new Uint8Array(16)))
      .toString("hex")
      .replace(/^[89a-f]/, "1");

  const caKeys = await crypto.subtle.generateKey(alg, true, ["sign", "verify"]);
  const ca = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: serial(),
    name: `CN=${host}-ca@${unix}`,
    notBefore,
    notAfter,
    keys: caKeys,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature |
          x509.KeyUsageFlags.keyEncipherment |
          x509.KeyUsageFlags.keyCertSign,
        true,
      ),
    ],
  });
  const keys = await crypto.subtle.generateKey(alg, true, ["sign", "verify"]);
  const names = [
    isIP(host) ? { type: "ip" as const, value: host } : { type: "dns" as const, value: host },
    ...alternates.ips.map((value) => ({ type: "ip" as const, value })),
    ...alternates.dns.map((value) => ({ type: "dns" as const, value })),
  ];
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: serial(),
    subject: `CN=${host}@${unix}`,
    issuer: ca.subject,
    notBefore,
    notAfter,
    publicKey: keys.publicKey,
    signingKey: caKeys.privateKey,
    signingAlgorithm: alg,
    extensions: [
      new x509.BasicConstraintsExtension(false, undefined, true),
      new x509.KeyUsagesExtension(
        x509.KeyUsageFlags.digitalSignature | x509.KeyUsageFlags.keyEncipherment,
        true,
      ),
      new x509.ExtendedKeyUsageExtension([x509.ExtendedKeyUsage.serverAuth]),
      new x509.SubjectAlternativeNameExtension(names),
    ],
  });
  const key = KeyObject.from(keys.privateKey).export({ type: "pkcs8", format: "pem" }).toString();
  return { cert: `${cert.toString("pem")}\n${ca.toString("pem")}\n`, key };
}
