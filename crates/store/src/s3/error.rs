//! What a failed S3 call means for the contract: the SDK's error, whatever the
//! provider's status code or error body, mapped into the crate's [`Error`].

use std::fmt;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::error::{DisplayErrorContext, ProvideErrorMetadata, SdkError};

use landing_error::Error;

/// The write condition a request carried, which decides how its errors read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Cond {
    None,
    IfAbsent,
    IfMatch,
}

/// What a failed S3 call means for the contract.
#[derive(Debug, PartialEq, Eq)]
enum Kind {
    NotFound,
    NoBucket,
    Precondition,
    Other,
}

/// The private, precise error of one S3 call: HTTP status, S3 error code and message.
/// Never holds a request's headers, so never a credential.
#[derive(Debug)]
pub(super) struct Failure {
    status: Option<u16>,
    code: Option<String>,
    message: Option<String>,
    /// The SDK's own description (dispatch, timeout, decoding failures).
    detail: String,
}

impl Failure {
    pub(super) fn from_sdk<E>(err: &SdkError<E, HttpResponse>) -> Self
    where
        E: ProvideErrorMetadata + std::error::Error + 'static,
    {
        Failure {
            status: err.raw_response().map(|r| r.status().as_u16()),
            code: err.code().map(str::to_owned),
            message: err.message().map(str::to_owned),
            // A service error's SDK description dumps the whole response, headers
            // included; status, code and message say all a caller needs.
            detail: match err {
                SdkError::ServiceError(_) => "the server answered with an error".to_owned(),
                other => DisplayErrorContext(other).to_string(),
            },
        }
    }

    fn protocol(what: String) -> Self {
        Failure {
            status: None,
            code: None,
            message: None,
            detail: what,
        }
    }

    /// Is this the answer about a multipart upload that no longer exists?
    pub(super) fn is_no_such_upload(&self) -> bool {
        self.code.as_deref() == Some("NoSuchUpload")
    }

    fn kind(&self, cond: Cond) -> Kind {
        let code = self.code.as_deref();
        match (self.status, code) {
            (_, Some("PreconditionFailed")) | (Some(412), _) => Kind::Precondition,
            // A concurrent conditional write won the race (AWS).
            (_, Some("ConditionalRequestConflict")) if cond != Cond::None => Kind::Precondition,
            // AWS and moto answer If-Match on a missing key with 404 NoSuchKey.
            (_, Some("NoSuchKey")) | (Some(404), Some("NotFound")) if cond == Cond::IfMatch => {
                Kind::Precondition
            }
            (_, Some("NoSuchKey")) => Kind::NotFound,
            // The bucket named by --lake or --inbox: a setting to correct, not a retry.
            (_, Some("NoSuchBucket")) => Kind::NoBucket,
            // HEAD answers carry no body, hence no code; the SDK names them NotFound.
            (Some(404), None | Some("NotFound")) => Kind::NotFound,
            _ => Kind::Other,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.code, self.status) {
            (Some(code), status) => {
                if let Some(status) = status {
                    write!(f, "HTTP {status} ")?;
                }
                f.write_str(code)?;
                if let Some(message) = &self.message {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            (None, Some(status)) => write!(f, "HTTP {status}: {}", self.detail),
            (None, None) => f.write_str(&self.detail),
        }
    }
}

impl std::error::Error for Failure {}

/// Map an SDK error into the public error for `op` on `loc`.
pub(super) fn map_err<E>(
    op: &'static str,
    loc: &str,
    err: SdkError<E, HttpResponse>,
    cond: Cond,
) -> Error
where
    E: ProvideErrorMetadata + std::error::Error + 'static,
{
    let failure = Failure::from_sdk(&err);
    match failure.kind(cond) {
        Kind::NotFound => Error::NotFound {
            location: loc.to_owned(),
        },
        Kind::NoBucket => Error::Config(format!("{loc}: {failure}: the bucket does not exist")),
        Kind::Precondition => Error::Precondition {
            location: loc.to_owned(),
        },
        Kind::Other => Error::store(op, loc, failure),
    }
}

/// Is this the failure of a request on a multipart upload that no longer exists?
pub(super) fn is_no_such_upload(e: &Error) -> bool {
    match e {
        Error::Store { source, .. } => source
            .downcast_ref::<Failure>()
            .is_some_and(Failure::is_no_such_upload),
        _ => false,
    }
}

/// An answer that is well-formed HTTP but not what S3 promises.
pub(super) fn protocol(op: &'static str, loc: &str, what: impl Into<String>) -> Error {
    Error::store(op, loc, Failure::protocol(what.into()))
}

pub(super) fn content_length(len: Option<i64>, op: &'static str, loc: &str) -> crate::Result<u64> {
    len.and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| protocol(op, loc, "answer carries no Content-Length"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(status: u16, code: Option<&str>) -> Failure {
        Failure {
            status: Some(status),
            code: code.map(str::to_owned),
            message: None,
            detail: String::new(),
        }
    }

    #[test]
    fn conditional_failures_are_preconditions_whatever_the_status() {
        let f = failure(412, Some("PreconditionFailed"));
        assert_eq!(f.kind(Cond::IfAbsent), Kind::Precondition);
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        let f = failure(409, Some("ConditionalRequestConflict"));
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        assert_eq!(f.kind(Cond::None), Kind::Other);
        let f = failure(404, Some("NoSuchKey"));
        assert_eq!(f.kind(Cond::IfMatch), Kind::Precondition);
        assert_eq!(f.kind(Cond::None), Kind::NotFound);
        assert_eq!(failure(404, None).kind(Cond::None), Kind::NotFound);
        assert_eq!(
            failure(404, Some("NoSuchBucket")).kind(Cond::None),
            Kind::NoBucket
        );
        assert_eq!(
            failure(403, Some("AccessDenied")).kind(Cond::None),
            Kind::Other
        );
    }
}
