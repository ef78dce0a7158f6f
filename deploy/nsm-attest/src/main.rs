//! nsm-attest --public-key <hex> [--user-data <hex>] [--nonce <hex>]
//!
//! Requests an attestation document from the Nitro Secure Module (/dev/nsm) binding the
//! given bytes and writes the raw COSE_Sign1 document to stdout. Errors go to stderr with
//! exit status 1. Used by enclave/attestation/nitro-provider.ts, since Node cannot ioctl.

use std::io::Write;
use std::process::ExitCode;

use aws_nitro_enclaves_nsm_api::api::{Request, Response};
use aws_nitro_enclaves_nsm_api::driver::{nsm_exit, nsm_init, nsm_process_request};
use serde_bytes::ByteBuf;

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("nsm-attest: {message}");
            ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let (mut public_key, mut user_data, mut nonce) = (None, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let value = args.next().ok_or_else(|| format!("{flag} needs a hex value"))?;
        let bytes = Some(ByteBuf::from(decode_hex(&value).map_err(|e| format!("{flag}: {e}"))?));
        match flag.as_str() {
            "--public-key" => public_key = bytes,
            "--user-data" => user_data = bytes,
            "--nonce" => nonce = bytes,
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if public_key.is_none() {
        return Err("--public-key is required".into());
    }

    let fd = nsm_init();
    if fd < 0 {
        return Err("cannot open /dev/nsm (not inside a Nitro Enclave?)".into());
    }
    let response = nsm_process_request(fd, Request::Attestation { user_data, nonce, public_key });
    nsm_exit(fd);

    match response {
        Response::Attestation { document } => {
            let mut stdout = std::io::stdout().lock();
            stdout.write_all(&document).and_then(|()| stdout.flush()).map_err(|e| e.to_string())
        }
        Response::Error(code) => Err(format!("the NSM refused the request: {code:?}")),
        _ => Err("the NSM sent an unexpected response".into()),
    }
}

fn decode_hex(text: &str) -> Result<Vec<u8>, String> {
    // Checked up front: from_str_radix alone would accept a leading '+'.
    if text.len() % 2 != 0 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("expected an even number of hex digits".into());
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).map_err(|e| e.to_string()))
        .collect()
}
