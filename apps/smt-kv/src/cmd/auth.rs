//! `AUTH` and the server's password (Redis's `requirepass`: the default
//! user's password; there are no other users).

use super::{After, CmdError, Ctx};
use crate::resp::reply;

/// The password clients must send with `AUTH` before any other command.
/// Its `Debug` never shows it, and it has no `==`: compare with
/// [`Password::matches`].
#[derive(Clone)]
pub struct Password(Vec<u8>);

impl Password {
    /// The password clients must send with AUTH.
    pub fn new(password: Vec<u8>) -> Self {
        Self(password)
    }

    /// Whether `candidate` is the password, in time that depends on the
    /// lengths only, not on where the first difference lies.
    pub fn matches(&self, candidate: &[u8]) -> bool {
        let mut diff = u8::from(self.0.len() != candidate.len());
        for (i, &b) in self.0.iter().enumerate() {
            diff |= b ^ candidate.get(i).copied().unwrap_or(!b);
        }
        diff == 0
    }
}

impl std::fmt::Debug for Password {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Password(..)")
    }
}

/// `AUTH password` or `AUTH username password`, where the only user is
/// `default`. A wrong password leaves an authenticated client
/// authenticated, as in Redis.
pub(super) fn auth(cx: &mut Ctx<'_>, args: &[&[u8]]) -> Result<After, CmdError> {
    let (user, password) = match args {
        [_, password] => (&b"default"[..], *password),
        [_, user, password] => (*user, *password),
        _ => return Err(CmdError::Syntax),
    };
    let ok = match &cx.store.settings.requirepass {
        // Redis's default user without a password takes any password in
        // the two-word form, and refuses the one-word form.
        None if args.len() == 2 => return Err(CmdError::NoPasswordSet),
        None => user == b"default",
        Some(p) => user == b"default" && p.matches(password),
    };
    if !ok {
        return Err(CmdError::WrongPass);
    }
    cx.client.authenticated = true;
    reply::ok(cx.out);
    Ok(After::Continue)
}

#[cfg(test)]
mod tests {
    use super::Password;

    #[test]
    fn only_the_exact_password_matches() {
        let p = Password::new(b"sesame".to_vec());
        assert!(p.matches(b"sesame"));
        for wrong in [&b""[..], b"sesam", b"sesame!", b"Sesame", b"\xff"] {
            assert!(!p.matches(wrong));
        }
        assert!(Password::new(Vec::new()).matches(b""));
        assert_eq!(format!("{p:?}"), "Password(..)");
    }
}
