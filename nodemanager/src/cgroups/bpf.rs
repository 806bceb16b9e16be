//! Device isolation on cgroup2: a hand-assembled `BPF_PROG_TYPE_CGROUP_DEVICE` program that
//! denies the listed device numbers and allows everything else, loaded and attached with the
//! raw `bpf(2)` syscall (as runc's `devicefilter` does), so the NM needs neither libbpf nor a
//! compiler at run time.
//!
//! cgroup2 has no `devices.deny` file: on every device access (open, mknod) of a task, the
//! kernel runs the device programs attached to the task's cgroup2 cgroup and its ancestors,
//! and a program returning 0 turns the access into `EPERM`. The program is attached with
//! `BPF_F_ALLOW_MULTI`, so the programs a parent already has (systemd's `DevicePolicy=`) still
//! run: every one of them must allow an access. It lives as long as the cgroup it is attached
//! to: removing the cgroup frees it, and the NM keeps no file descriptor.

use std::fs::File;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};

use nix::errno::Errno;
use nix::libc;

use crate::isolation::DeviceNumber;

const BPF_PROG_LOAD: libc::c_long = 5;
const BPF_PROG_ATTACH: libc::c_long = 8;
const BPF_PROG_TYPE_CGROUP_DEVICE: u32 = 15;
const BPF_CGROUP_DEVICE: u32 = 6;
const BPF_F_ALLOW_MULTI: u32 = 1 << 1;
/// `BPF_DEVCG_DEV_BLOCK` / `BPF_DEVCG_DEV_CHAR`: the low 16 bits of `access_type`.
const DEV_BLOCK: i32 = 1;
const DEV_CHAR: i32 = 2;
/// The verifier log kept when a load fails (only then: it costs a second load).
const LOG_SIZE: usize = 64 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum BpfError {
    #[error("device {0} cannot be expressed in a device program (kind must be 'c' or 'b', numbers below 2^31)")]
    BadDevice(DeviceNumber),
    #[error("bpf(BPF_PROG_LOAD) of the device program failed: {errno}{log}")]
    Load { errno: Errno, log: String },
    #[error("cannot open cgroup {path}: {source}")]
    OpenCgroup {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("bpf(BPF_PROG_ATTACH) of the device program to {path} failed: {errno}")]
    Attach { path: PathBuf, errno: Errno },
}

/// One eBPF instruction (`struct bpf_insn`).
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Insn {
    pub code: u8,
    /// dst_reg in the low nibble, src_reg in the high one.
    pub regs: u8,
    pub off: i16,
    pub imm: i32,
}

const fn insn(code: u8, dst: u8, src: u8, off: i16, imm: i32) -> Insn {
    Insn {
        code,
        regs: (src << 4) | (dst & 0x0f),
        off,
        imm,
    }
}

// Opcodes: class | op | source.
const LDX_MEM_W: u8 = 0x01 | 0x60; // BPF_LDX | BPF_MEM | BPF_W
const ALU32_AND_K: u8 = 0x04 | 0x50; // BPF_ALU | BPF_AND | BPF_K
const JMP_JNE_K: u8 = 0x05 | 0x50; // BPF_JMP | BPF_JNE | BPF_K
const ALU64_MOV_K: u8 = 0x07 | 0xb0; // BPF_ALU64 | BPF_MOV | BPF_K
const JMP_EXIT: u8 = 0x05 | 0x90; // BPF_JMP | BPF_EXIT

/// The program: deny (return 0) any access to a listed device, allow (return 1) the rest.
///
/// ```text
///   r2 = ctx->access_type; w2 &= 0xffff     device kind
///   r4 = ctx->major; r5 = ctx->minor
///   for each denied device:
///     if r2 != kind  goto next
///     if r4 != major goto next
///     if r5 != minor goto next
///     r0 = 0; exit
///   next:
///   r0 = 1; exit
/// ```
pub fn device_filter(denied: &[DeviceNumber]) -> Result<Vec<Insn>, BpfError> {
    let mut p = vec![
        insn(LDX_MEM_W, 2, 1, 0, 0),
        insn(ALU32_AND_K, 2, 0, 0, 0xffff),
        insn(LDX_MEM_W, 4, 1, 4, 0),
        insn(LDX_MEM_W, 5, 1, 8, 0),
    ];
    for d in denied {
        let kind = match d.kind {
            'c' => DEV_CHAR,
            'b' => DEV_BLOCK,
            _ => return Err(BpfError::BadDevice(*d)),
        };
        let (Ok(major), Ok(minor)) = (i32::try_from(d.major), i32::try_from(d.minor)) else {
            return Err(BpfError::BadDevice(*d));
        };
        p.extend([
            insn(JMP_JNE_K, 2, 0, 4, kind),
            insn(JMP_JNE_K, 4, 0, 3, major),
            insn(JMP_JNE_K, 5, 0, 2, minor),
            insn(ALU64_MOV_K, 0, 0, 0, 0),
            insn(JMP_EXIT, 0, 0, 0, 0),
        ]);
    }
    p.extend([insn(ALU64_MOV_K, 0, 0, 0, 1), insn(JMP_EXIT, 0, 0, 0, 0)]);
    Ok(p)
}

/// `union bpf_attr` for `BPF_PROG_LOAD`, up to `expected_attach_type`.
#[repr(C)]
struct ProgLoadAttr {
    prog_type: u32,
    insn_cnt: u32,
    insns: u64,
    license: u64,
    log_level: u32,
    log_size: u32,
    log_buf: u64,
    kern_version: u32,
    prog_flags: u32,
    prog_name: [u8; 16],
    prog_ifindex: u32,
    expected_attach_type: u32,
}

/// `union bpf_attr` for `BPF_PROG_ATTACH`.
#[repr(C)]
struct ProgAttachAttr {
    target_fd: u32,
    attach_bpf_fd: u32,
    attach_type: u32,
    attach_flags: u32,
    replace_bpf_fd: u32,
}

fn sys_bpf<T>(cmd: libc::c_long, attr: &mut T) -> Result<libc::c_long, Errno> {
    // SAFETY: `attr` is a live, initialised `#[repr(C)]` prefix of `union bpf_attr` and its
    // exact size is passed, so the kernel reads (and for loads writes the log through the
    // pointers inside it) only memory that we own for the duration of the call.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            cmd,
            attr as *mut T as *mut libc::c_void,
            std::mem::size_of::<T>() as libc::c_uint,
        )
    };
    if r < 0 {
        Err(Errno::last())
    } else {
        Ok(r)
    }
}

/// Loads a device program; on failure loads it again with the verifier log for the error.
pub fn load(insns: &[Insn]) -> Result<OwnedFd, BpfError> {
    const LICENSE: &[u8] = b"Apache-2.0\0";
    let mut name = [0u8; 16];
    name[..11].copy_from_slice(b"spindle_dev");
    let attempt = |log: Option<&mut Vec<u8>>| {
        let (log_level, log_size, log_buf) = match log {
            Some(buf) => (1, buf.len() as u32, buf.as_mut_ptr() as u64),
            None => (0, 0, 0),
        };
        let mut attr = ProgLoadAttr {
            prog_type: BPF_PROG_TYPE_CGROUP_DEVICE,
            insn_cnt: insns.len() as u32,
            insns: insns.as_ptr() as u64,
            license: LICENSE.as_ptr() as u64,
            log_level,
            log_size,
            log_buf,
            kern_version: 0,
            prog_flags: 0,
            prog_name: name,
            prog_ifindex: 0,
            expected_attach_type: BPF_CGROUP_DEVICE,
        };
        sys_bpf(BPF_PROG_LOAD, &mut attr)
    };
    let fd = match attempt(None) {
        Ok(fd) => fd,
        Err(errno) => {
            let mut buf = vec![0u8; LOG_SIZE];
            let _ = attempt(Some(&mut buf));
            let end = buf.iter().position(|&b| b == 0).unwrap_or(0);
            let text = String::from_utf8_lossy(&buf[..end])
                .trim()
                .replace('\n', "; ");
            let log = if text.is_empty() {
                String::new()
            } else {
                format!(" (verifier: {text})")
            };
            return Err(BpfError::Load { errno, log });
        }
    };
    let fd = i32::try_from(fd).map_err(|_| BpfError::Load {
        errno: Errno::EBADF,
        log: String::new(),
    })?;
    // SAFETY: a successful BPF_PROG_LOAD returns a new file descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Attaches a loaded device program to the cgroup2 directory `cgroup`.
pub fn attach(prog: &OwnedFd, cgroup: &Path) -> Result<(), BpfError> {
    let dir = File::open(cgroup).map_err(|source| BpfError::OpenCgroup {
        path: cgroup.to_path_buf(),
        source,
    })?;
    let fd_u32 = |fd: i32| u32::try_from(fd).unwrap_or(u32::MAX);
    let mut attr = ProgAttachAttr {
        target_fd: fd_u32(dir.as_raw_fd()),
        attach_bpf_fd: fd_u32(prog.as_raw_fd()),
        attach_type: BPF_CGROUP_DEVICE,
        attach_flags: BPF_F_ALLOW_MULTI,
        replace_bpf_fd: 0,
    };
    sys_bpf(BPF_PROG_ATTACH, &mut attr)
        .map(|_| ())
        .map_err(|errno| BpfError::Attach {
            path: cgroup.to_path_buf(),
            errno,
        })
}

/// Denies `denied` to every task of the cgroup2 directory `cgroup`.
pub fn deny_devices(cgroup: &Path, denied: &[DeviceNumber]) -> Result<(), BpfError> {
    let prog = load(&device_filter(denied)?)?;
    attach(&prog, cgroup)
}

/// Whether this kernel and this process can load device programs at all (checked once at NM
/// start, so a node that cannot isolate devices on cgroup2 says so before any container).
pub fn probe() -> Result<(), BpfError> {
    load(&device_filter(&[])?).map(drop)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_program_has_one_block_per_denied_device() {
        let p = device_filter(&[DeviceNumber::char(195, 0), DeviceNumber::char(195, 3)]).unwrap();
        assert_eq!(p.len(), 4 + 2 * 5 + 2);
        // The first rule: jump over its 4 remaining instructions unless the kind matches.
        assert_eq!(p[4], insn(JMP_JNE_K, 2, 0, 4, DEV_CHAR));
        assert_eq!(p[6].imm, 0);
        assert_eq!(p[11].imm, 3);
        assert_eq!(p[7], insn(ALU64_MOV_K, 0, 0, 0, 0));
        assert_eq!(p[p.len() - 2].imm, 1, "everything else is allowed");
        assert_eq!(std::mem::size_of::<Insn>(), 8);
        assert_eq!(std::mem::size_of::<ProgLoadAttr>(), 72);
        assert_eq!(p[0].regs, 0x12, "dst r2, src r1");
        assert!(matches!(
            device_filter(&[DeviceNumber {
                kind: 'x',
                major: 1,
                minor: 1
            }]),
            Err(BpfError::BadDevice(_))
        ));
        assert!(device_filter(&[DeviceNumber::char(1, u32::MAX)]).is_err());
    }

    /// As root the kernel's verifier accepts the program (elsewhere the load is refused with
    /// EPERM, which says nothing about the program).
    #[test]
    fn the_verifier_accepts_the_program_when_allowed_to_load() {
        let denied: Vec<DeviceNumber> = (0..64).map(|m| DeviceNumber::char(195, m)).collect();
        match load(&device_filter(&denied).unwrap()) {
            Ok(_) => {}
            Err(BpfError::Load {
                errno: Errno::EPERM,
                ..
            }) => spindle_test_support::require::skip(
                "the_verifier_accepts_the_program_when_allowed_to_load",
                "this process may not load BPF programs (EPERM)",
            ),
            Err(e) => panic!("{e}"),
        }
    }
}
