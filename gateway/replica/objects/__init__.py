"""Provider objects (stored responses, conversations, files, vector stores, containers)
bound to the app that created them through the gateway: every app shares the upstream
credential, so without this one app holding another's id could read or continue it."""
