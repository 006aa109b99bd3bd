//! The string form of the validated newtypes of `crate::vocab`: one macro,
//! in a file of its own so the files that use it import a sibling, not the
//! module's root. Pure; compile time only.

/// Gives a validated string newtype (`struct T(String)` with
/// `fn parse(&str) -> Option<T>`, or `-> Result<T, Refusal>` in the form
/// without `$expected`) the conversions that make its serde form exactly
/// the plain string: with `#[serde(try_from = "String", into = "String")]`
/// its canonical JSON, and so every digest over it, is what a `String` field
/// gave, and deserializing runs `parse` (`$expected`, or the refusal, is the
/// error). Also `as_str` and `Display`.
macro_rules! string_form {
    ($type:ident, $expected:literal) => {
        impl TryFrom<String> for $type {
            type Error = &'static str;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $type::parse(&value).ok_or($expected)
            }
        }

        $crate::vocab::string_form::string_form!(@common $type);
    };
    ($type:ident) => {
        impl TryFrom<String> for $type {
            type Error = $crate::vocab::Refusal;
            fn try_from(value: String) -> Result<Self, Self::Error> {
                $type::parse(&value)
            }
        }

        $crate::vocab::string_form::string_form!(@common $type);
    };
    (@common $type:ident) => {
        impl $type {
            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl From<$type> for String {
            fn from(value: $type) -> String {
                value.0
            }
        }

        impl std::fmt::Display for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(&self.0)
            }
        }
    };
}
pub(crate) use string_form;
