use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::thread;

use super::*;

/// An ELF file with a GNU build ID that every Debian system has.
const ELF: &str = "/usr/bin/true";

fn true_build_id() -> String {
    elf_build_id(Path::new(ELF)).expect("/usr/bin/true has a build ID")
}

/// A one-thread HTTP server on 127.0.0.1 answering `answer(path)` (status,
/// body) to each request; its URL and the paths it was asked.
pub(crate) fn server(answer: fn(&str) -> (u16, Vec<u8>)) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    thread::spawn(move || {
        for s in l.incoming() {
            let Ok(mut s) = s else { return };
            let mut r = BufReader::new(s.try_clone().unwrap());
            let mut line = String::new();
            r.read_line(&mut line).unwrap();
            let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap() <= 2 {
                    break;
                }
            }
            log.lock().unwrap().push(path.clone());
            let (status, body) = answer(&path);
            let _ = write!(
                s,
                "HTTP/1.1 {status} X\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            let _ = s.write_all(&body);
        }
    });
    (url, asked)
}

fn client(urls: Vec<String>, cache: &Path) -> Debuginfod {
    Debuginfod::new(urls, cache.to_path_buf(), Duration::from_secs(10), None).unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("bpfmux-debuginfod-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&d);
    d
}

#[test]
fn downloads_checks_and_caches() {
    let (url, asked) = server(|p| {
        if p.ends_with("/debuginfo") {
            (200, fs::read(ELF).unwrap())
        } else {
            (404, Vec::new())
        }
    });
    let cache = tmp("cache");
    let c = client(vec![format!("{url}/")], &cache);
    let id = true_build_id();
    let got = c.fetch(&id.to_uppercase(), Kind::Debuginfo).unwrap();
    assert_eq!(got.file, cache.join(&id).join("debuginfo"));
    assert_eq!(got.server.as_deref(), Some(url.as_str()));
    assert_eq!(fs::read(&got.file).unwrap(), fs::read(ELF).unwrap());
    // From the cache now: the server is not asked again.
    let again = c.fetch(&id, Kind::Debuginfo).unwrap();
    assert_eq!(again.server, None);
    assert_eq!(*asked.lock().unwrap(), [format!("/buildid/{id}/debuginfo")]);
    // No temporary file left beside it.
    assert_eq!(fs::read_dir(cache.join(&id)).unwrap().count(), 1);
    let e = c.fetch(&id, Kind::Executable).unwrap_err().to_string();
    assert_eq!(e, format!("{url}: not there (HTTP 404)"));
    fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn refuses_a_file_of_another_build_id() {
    let (url, _) = server(|_| (200, fs::read(ELF).unwrap()));
    let cache = tmp("wrong");
    let c = client(vec![url.clone()], &cache);
    let other = "00112233445566778899aabbccddeeff00112233";
    let e = c.fetch(other, Kind::Debuginfo).unwrap_err().to_string();
    assert_eq!(
        e,
        format!("{url}: sent a file with build ID {}", true_build_id())
    );
    assert!(!cache.join(other).join("debuginfo").exists());
    assert_eq!(fs::read_dir(cache.join(other)).unwrap().count(), 0);
    let (url, _) = server(|_| (200, b"not an ELF file".to_vec()));
    let e = client(vec![url.clone()], &cache)
        .fetch(other, Kind::Debuginfo)
        .unwrap_err()
        .to_string();
    assert_eq!(
        e,
        format!("{url}: sent a file that is not ELF with a build ID")
    );
    fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn a_dead_server_is_asked_once_and_the_next_one_answers() {
    let dead = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", l.local_addr().unwrap())
    };
    let (url, _) = server(|_| (200, fs::read(ELF).unwrap()));
    let cache = tmp("dead");
    let c = client(vec![dead.clone()], &cache);
    let id = true_build_id();
    let e = c.fetch(&id, Kind::Executable).unwrap_err().to_string();
    assert_eq!(e, format!("{dead}: connection refused"));
    let e = c.fetch(&id, Kind::Debuginfo).unwrap_err().to_string();
    assert_eq!(e, format!("{dead}: not reached earlier in this run"));
    let c = client(vec![dead, url.clone()], &cache);
    let got = c.fetch(&id, Kind::Executable).unwrap();
    assert_eq!(got.server.as_deref(), Some(url.as_str()));
    fs::remove_dir_all(&cache).unwrap();
}

#[test]
fn bad_input_is_refused() {
    let cache = tmp("bad");
    let e = Debuginfod::new(
        vec!["ftp://x".into()],
        cache.clone(),
        Duration::from_secs(1),
        None,
    )
    .unwrap_err()
    .to_string();
    assert_eq!(
        e,
        "DEBUGINFOD_URLS: ftp://x: not an http:// or https:// URL"
    );
    let c = client(vec!["http://127.0.0.1:9".into()], &cache);
    let e = c.fetch("../etc", Kind::Debuginfo).unwrap_err().to_string();
    assert_eq!(e, "\"../etc\" is not a build ID");
}

#[test]
fn max_size_is_kept() {
    let (url, _) = server(|_| (200, fs::read(ELF).unwrap()));
    let cache = tmp("max");
    let c = Debuginfod::new(
        vec![url.clone()],
        cache.clone(),
        Duration::from_secs(10),
        Some(100),
    )
    .unwrap();
    let e = c
        .fetch(&true_build_id(), Kind::Debuginfo)
        .unwrap_err()
        .to_string();
    assert_eq!(e, format!("{url}: larger than DEBUGINFOD_MAXSIZE=100"));
    let _ = fs::remove_dir_all(&cache);
}

/// The debug file [`live_symbolizer_names_a_stripped_binary`] serves.
static SERVED: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();

fn built_tool(c: &mut std::process::Command) {
    let out = c
        .output()
        .unwrap_or_else(|e| panic!("{c:?} (cc and binutils are needed): {e}"));
    assert!(
        out.status.success(),
        "{c:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A stripped binary whose debug file only a server has: its static
/// function is named, with file:line, from that debug file (downloaded
/// once, then from the cache); with no server it keeps no such name.
#[test]
fn live_symbolizer_names_a_stripped_binary() {
    use crate::symbolize::elf_table::load_segments;
    use crate::symbolize::{SymResult, UserSymbolizer};
    use object::{Object, ObjectSymbol};
    use std::process::Command;

    let dir = tmp("stripped");
    fs::create_dir_all(&dir).unwrap();
    let src = dir.join("prog.c");
    fs::write(
        &src,
        "static int __attribute__((noinline)) hidden_helper(int x)\n{\n\treturn x * 3 + 1;\n}\n\
         int main(int argc, char **argv)\n{\n\t(void)argv;\n\treturn hidden_helper(argc);\n}\n",
    )
    .unwrap();
    let exe = dir.join("prog");
    let debug = dir.join("prog.debug");
    built_tool(
        Command::new("cc")
            .args(["-g", "-O1", "-Wl,--build-id", "-o"])
            .arg(&exe)
            .arg(&src),
    );
    // What the server gives: the unstripped build (same build ID, DWARF).
    fs::copy(&exe, &debug).unwrap();
    built_tool(Command::new("strip").arg("-s").arg(&exe));
    SERVED.set(fs::read(&debug).unwrap()).unwrap();
    // The helper's file offset in the stripped binary.
    let data = fs::read(&debug).unwrap();
    let obj = object::File::parse(&*data).unwrap();
    let vaddr = obj
        .symbols()
        .find(|s| s.name() == Ok("hidden_helper"))
        .expect("hidden_helper in the debug file")
        .address();
    let segments = load_segments(&exe).unwrap();
    let (o, _, v) = *segments
        .iter()
        .find(|&&(_, size, v)| (v..v + size).contains(&vaddr))
        .expect("a segment holds the helper");
    let off = vaddr - v + o + 2;
    let named = |r: &SymResult| match r {
        SymResult::Symbol(s) => Some((s.name.clone(), s.offset, s.file.clone(), s.line)),
        _ => None,
    };

    // No server: the stripped binary has no name for it.
    let alone = UserSymbolizer::default().symbolize_file(&exe, &exe, &[off]);
    assert!(
        named(&alone[0]).is_none_or(|(n, ..)| n != "hidden_helper"),
        "{alone:?}"
    );

    let (url, asked) = server(|p| match p.ends_with("/debuginfo") {
        true => (200, SERVED.get().unwrap().clone()),
        false => (404, Vec::new()),
    });
    let cache = dir.join("cache");
    let mut u = UserSymbolizer::default().with_debuginfod(Some(client(vec![url.clone()], &cache)));
    let got = u.symbolize_file(&exe, &exe, &[off]);
    let (name, at, file, line) = named(&got[0]).unwrap_or_else(|| panic!("{got:?}"));
    assert_eq!((name.as_str(), at), ("hidden_helper", 2));
    assert!(
        file.is_some_and(|f| f.ends_with("prog.c")) && line.is_some(),
        "{got:?}"
    );
    let answers = u.debuginfod_answers();
    assert_eq!(answers.len(), 1);
    let fetched = answers[0].result.as_ref().unwrap();
    assert_eq!(fetched.server.as_deref(), Some(url.as_str()));
    // Asked once per file.
    u.symbolize_file(&exe, &exe, &[off]);
    assert_eq!(u.debuginfod_answers().len(), 1);
    assert_eq!(asked.lock().unwrap().len(), 1);

    // From the cache, with a server that is not there.
    let dead = "http://127.0.0.1:9".to_string();
    let mut u = UserSymbolizer::default().with_debuginfod(Some(client(vec![dead.clone()], &cache)));
    let got = u.symbolize_file(&exe, &exe, &[off]);
    assert_eq!(named(&got[0]).map(|n| n.0), Some("hidden_helper".into()));
    assert_eq!(
        u.debuginfod_answers()[0].result.as_ref().unwrap().server,
        None
    );

    // Nothing cached and the server gone: why, and the binary's own names.
    let mut u = UserSymbolizer::default()
        .with_debuginfod(Some(client(vec![dead.clone()], &dir.join("cold"))));
    let got = u.symbolize_file(&exe, &exe, &[off]);
    assert_eq!(got, alone);
    let why = u.debuginfod_answers()[0].result.as_ref().unwrap_err();
    assert!(why.contains(&dead) && why.contains("refused"), "{why}");
    let _ = fs::remove_dir_all(&dir);
}
