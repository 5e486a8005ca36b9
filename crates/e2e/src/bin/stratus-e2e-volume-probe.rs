//! The storage suites' workload, packed as an image: given a file on a volume and a token, it
//! prints `found <content>` when the file is there (the data outlived a pod) or writes the token,
//! syncs it to the disk and prints `wrote <token>`; then it waits to be stopped.

use std::io::Write as _;

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(path), Some(token)) = (args.next(), args.next()) else {
        eprintln!("usage: stratus-e2e-volume-probe <file> <token>");
        std::process::exit(2);
    };
    match std::fs::read_to_string(&path) {
        Ok(content) => println!("found {content}"),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut file = std::fs::File::create(&path).unwrap_or_else(|e| fail(&path, e));
            file.write_all(token.as_bytes())
                .and_then(|()| file.sync_all())
                .unwrap_or_else(|e| fail(&path, e));
            println!("wrote {token}");
        }
        Err(e) => fail(&path, e),
    }
    // PID 1 of its container: no signal handler, so the pod's short grace period stops it.
    loop {
        std::thread::park();
    }
}

fn fail(path: &str, e: std::io::Error) -> ! {
    eprintln!("{path}: {e}");
    std::process::exit(1);
}
