//! YARN's REST error body: `{"RemoteException":{"exception","message","javaClassName"}}`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteExceptionBody {
    #[serde(rename = "RemoteException")]
    pub remote_exception: RemoteException,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteException {
    pub exception: String,
    pub message: String,
    #[serde(rename = "javaClassName")]
    pub java_class_name: String,
}

/// The exception kinds Spindle raises, with YARN's class names and status codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExceptionKind {
    /// 400
    BadRequest,
    /// 400: YARN maps IllegalArgumentException to 400 as well.
    IllegalArgument,
    /// 401
    Authorization,
    /// 403
    Forbidden,
    /// 404
    NotFound,
    /// 405
    MethodNotAllowed,
    /// 409
    Conflict,
    /// 409: an AM called allocate or finish without (or before re-) registering, e.g.
    /// after an RM restart; YARN's AMRMClient registers again and resends its asks.
    AmNotRegistered,
    /// 413: a request body above a configured limit (the blob store's file or user limit).
    PayloadTooLarge,
    /// 500
    Internal,
    /// 503: YARN's fallback for anything unmapped, and what a stopping RM answers.
    ServiceUnavailable,
}

impl ExceptionKind {
    pub fn status(&self) -> u16 {
        match self {
            Self::BadRequest | Self::IllegalArgument => 400,
            Self::Authorization => 401,
            Self::Forbidden => 403,
            Self::NotFound => 404,
            Self::MethodNotAllowed => 405,
            Self::Conflict | Self::AmNotRegistered => 409,
            Self::PayloadTooLarge => 413,
            Self::Internal => 500,
            Self::ServiceUnavailable => 503,
        }
    }
    pub fn exception(&self) -> &'static str {
        match self {
            Self::BadRequest => "BadRequestException",
            Self::IllegalArgument => "IllegalArgumentException",
            Self::Authorization => "AuthorizationException",
            Self::Forbidden => "ForbiddenException",
            Self::NotFound => "NotFoundException",
            Self::MethodNotAllowed => "WebApplicationException",
            Self::Conflict => "YarnException",
            Self::AmNotRegistered => "ApplicationMasterNotRegisteredException",
            Self::PayloadTooLarge => "YarnException",
            Self::Internal => "YarnRuntimeException",
            Self::ServiceUnavailable => "YarnException",
        }
    }
    pub fn java_class_name(&self) -> &'static str {
        match self {
            Self::BadRequest => "org.apache.hadoop.yarn.webapp.BadRequestException",
            Self::IllegalArgument => "java.lang.IllegalArgumentException",
            Self::Authorization => "org.apache.hadoop.security.authorize.AuthorizationException",
            Self::Forbidden => "org.apache.hadoop.yarn.webapp.ForbiddenException",
            Self::NotFound => "org.apache.hadoop.yarn.webapp.NotFoundException",
            Self::MethodNotAllowed => "javax.ws.rs.WebApplicationException",
            Self::Conflict => "org.apache.hadoop.yarn.exceptions.YarnException",
            Self::AmNotRegistered => {
                "org.apache.hadoop.yarn.exceptions.ApplicationMasterNotRegisteredException"
            }
            Self::PayloadTooLarge => "org.apache.hadoop.yarn.exceptions.YarnException",
            Self::Internal => "org.apache.hadoop.yarn.exceptions.YarnRuntimeException",
            Self::ServiceUnavailable => "org.apache.hadoop.yarn.exceptions.YarnException",
        }
    }
    pub fn body(&self, message: impl Into<String>) -> RemoteExceptionBody {
        RemoteExceptionBody {
            remote_exception: RemoteException {
                exception: self.exception().to_string(),
                message: message.into(),
                java_class_name: self.java_class_name().to_string(),
            },
        }
    }
}
