//! Standard output that a closed pipe ends quietly.
//!
//! `println!` panics when stdout is gone (`smt demo | head -3`): the
//! reader stopped listening, which is no error of ours and no reason for a
//! backtrace. [`say!`] and [`say_part!`] print like `println!` and
//! `print!`, and end the process then, with the status of one killed by
//! SIGPIPE, as C tools do.

use std::fmt;
use std::io::Write;

/// `println!` that ends the process quietly on a closed stdout.
macro_rules! say {
    () => {
        $crate::out::write(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::write(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `print!` that ends the process quietly on a closed stdout.
macro_rules! say_part {
    ($($arg:tt)*) => {
        $crate::out::write(format_args!($($arg)*))
    };
}

/// Exit status of a process killed by SIGPIPE (128 + 13).
const CLOSED_PIPE_STATUS: i32 = 141;

pub fn write(args: fmt::Arguments<'_>) {
    let mut stdout = std::io::stdout().lock();
    if stdout
        .write_fmt(args)
        .and_then(|()| stdout.flush())
        .is_err()
    {
        std::process::exit(CLOSED_PIPE_STATUS);
    }
}
