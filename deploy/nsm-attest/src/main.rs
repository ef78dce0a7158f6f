//! nsm-attest --public-key <hex> [--user-data <hex>] [--nonce <hex>]
//! nsm-attest --seed-entropy <bytes>
//!
//! Requests an attestation document from the Nitro Secure Module (/dev/nsm) binding the
//! given bytes and writes the raw COSE_Sign1 document to stdout. Errors go to stderr with
//! exit status 1. Used by enclave/attestation/nitro-provider.ts, since Node cannot ioctl.
//!
//! --seed-entropy asks the NSM for that many random bytes (GetRandom) and adds them to the
//! kernel's pool with RNDADDENTROPY, crediting them, as nitriding does at boot: an enclave
//! has no disk, network or devices to gather entropy from, and its keys are made at start
//! (deploy/enclave-entrypoint.sh runs this before anything else).

use std::fs::OpenOptions;
use std::io::Write;
use std::os::fd::AsRawFd;
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
    let argv: Vec<String> = std::env::args().skip(1).collect();
    if argv.first().map(String::as_str) == Some("--seed-entropy") {
        let bytes = match argv.as_slice() {
            [_, n] => n.parse::<usize>().ok().filter(|n| (1..=4096).contains(n)),
            _ => None,
        };
        return seed_entropy(bytes.ok_or("--seed-entropy needs a byte count from 1 to 4096")?);
    }
    let (mut public_key, mut user_data, mut nonce) = (None, None, None);
    let mut args = argv.into_iter();
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

/// _IOW('R', 0x03, int[2]) from <linux/random.h>.
const RNDADDENTROPY: u64 = 0x4008_5203;

fn seed_entropy(bytes: usize) -> Result<(), String> {
    let fd = nsm_init();
    if fd < 0 {
        return Err("cannot open /dev/nsm (not inside a Nitro Enclave?)".into());
    }
    let mut random = Vec::with_capacity(bytes);
    let mut failure = None;
    while random.len() < bytes {
        match nsm_process_request(fd, Request::GetRandom) {
            Response::GetRandom { random: chunk } if !chunk.is_empty() => random.extend_from_slice(&chunk),
            Response::Error(code) => { failure = Some(format!("the NSM refused GetRandom: {code:?}")); break; }
            _ => { failure = Some("the NSM sent an unexpected response to GetRandom".into()); break; }
        }
    }
    nsm_exit(fd);
    if let Some(message) = failure {
        return Err(message);
    }
    random.truncate(bytes);
    // struct rand_pool_info { int entropy_count (bits); int buf_size; __u32 buf[]; }
    let mut info = Vec::with_capacity(8 + bytes);
    info.extend_from_slice(&i32::try_from(bytes * 8).map_err(|e| e.to_string())?.to_ne_bytes());
    info.extend_from_slice(&i32::try_from(bytes).map_err(|e| e.to_string())?.to_ne_bytes());
    info.extend_from_slice(&random);
    let device = OpenOptions::new().write(true).open("/dev/random").map_err(|e| format!("/dev/random: {e}"))?;
    // SAFETY: info is a complete rand_pool_info that outlives the call; the kernel only reads it.
    let rc = unsafe { libc::ioctl(device.as_raw_fd(), RNDADDENTROPY as _, info.as_ptr()) };
    if rc != 0 {
        return Err(format!("RNDADDENTROPY: {}", std::io::Error::last_os_error()));
    }
    eprintln!("nsm-attest: added {bytes} bytes from the NSM to the kernel's entropy pool");
    Ok(())
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
