//! Just enough rtnetlink to create a veth pair (for the native-XDP probe,
//! run inside a throwaway network namespace).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};

const RTM_NEWLINK: u16 = 16;
const NLMSG_ERROR: u16 = 2;
const NLM_F_REQUEST: u16 = 0x1;
const NLM_F_ACK: u16 = 0x4;
const NLM_F_EXCL: u16 = 0x200;
const NLM_F_CREATE: u16 = 0x400;
const NLA_F_NESTED: u16 = 0x8000;
const IFLA_IFNAME: u16 = 3;
const IFLA_LINKINFO: u16 = 18;
const IFLA_INFO_KIND: u16 = 1;
const IFLA_INFO_DATA: u16 = 2;
const VETH_INFO_PEER: u16 = 1;
const IFINFOMSG_LEN: usize = 16;

/// Builds nested netlink attributes in a byte buffer.
struct Msg(Vec<u8>);

impl Msg {
    fn attr(&mut self, ty: u16, payload: &[u8]) {
        let len = 4 + payload.len();
        self.0.extend_from_slice(&(len as u16).to_ne_bytes());
        self.0.extend_from_slice(&ty.to_ne_bytes());
        self.0.extend_from_slice(payload);
        self.pad();
    }

    fn nest(&mut self, ty: u16, body: impl FnOnce(&mut Self)) {
        let at = self.0.len();
        self.0.extend_from_slice(&[0; 4]);
        body(self);
        let len = (self.0.len() - at) as u16;
        self.0[at..at + 2].copy_from_slice(&len.to_ne_bytes());
        self.0[at + 2..at + 4].copy_from_slice(&(ty | NLA_F_NESTED).to_ne_bytes());
    }

    fn pad(&mut self) {
        while !self.0.len().is_multiple_of(4) {
            self.0.push(0);
        }
    }
}

fn cstr(s: &str) -> Vec<u8> {
    let mut v = s.as_bytes().to_vec();
    v.push(0);
    v
}

/// Creates veth pair `a`/`b` in the calling thread's network namespace.
pub fn create_veth(a: &str, b: &str) -> io::Result<()> {
    let mut m = Msg(vec![0; 16 + IFINFOMSG_LEN]); // nlmsghdr + ifinfomsg
    m.attr(IFLA_IFNAME, &cstr(a));
    m.nest(IFLA_LINKINFO, |m| {
        m.attr(IFLA_INFO_KIND, b"veth");
        m.nest(IFLA_INFO_DATA, |m| {
            m.nest(VETH_INFO_PEER, |m| {
                m.0.extend_from_slice(&[0; IFINFOMSG_LEN]);
                m.attr(IFLA_IFNAME, &cstr(b));
            });
        });
    });
    let len = m.0.len() as u32;
    let flags = NLM_F_REQUEST | NLM_F_ACK | NLM_F_CREATE | NLM_F_EXCL;
    m.0[0..4].copy_from_slice(&len.to_ne_bytes());
    m.0[4..6].copy_from_slice(&RTM_NEWLINK.to_ne_bytes());
    m.0[6..8].copy_from_slice(&flags.to_ne_bytes());
    m.0[8..12].copy_from_slice(&1u32.to_ne_bytes()); // seq
    request(&m.0)
}

/// Sends one request and waits for its ack.
fn request(msg: &[u8]) -> io::Result<()> {
    // SAFETY: plain socket(2) call.
    let fd = unsafe {
        libc::socket(
            libc::AF_NETLINK,
            libc::SOCK_RAW | libc::SOCK_CLOEXEC,
            libc::NETLINK_ROUTE,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd was just created and is owned here.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: zeroed sockaddr_nl is the kernel as destination.
    let mut sa: libc::sockaddr_nl = unsafe { std::mem::zeroed() };
    sa.nl_family = libc::AF_NETLINK as u16;
    // SAFETY: valid buffer and address for the duration of the call.
    let rc = unsafe {
        libc::sendto(
            sock.as_raw_fd(),
            msg.as_ptr().cast(),
            msg.len(),
            0,
            (&sa as *const libc::sockaddr_nl).cast(),
            std::mem::size_of::<libc::sockaddr_nl>() as u32,
        )
    };
    if rc < 0 {
        return Err(io::Error::last_os_error());
    }
    let mut buf = [0u8; 4096];
    // SAFETY: writable buffer of the given length.
    let n = unsafe { libc::recv(sock.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    if n >= 20 && u16::from_ne_bytes([buf[4], buf[5]]) == NLMSG_ERROR {
        let code = i32::from_ne_bytes([buf[16], buf[17], buf[18], buf[19]]);
        return if code == 0 {
            Ok(())
        } else {
            Err(io::Error::from_raw_os_error(-code))
        };
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "unexpected netlink reply",
    ))
}
