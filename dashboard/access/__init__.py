"""Who may use the dashboard, checked on the server: sessions behind the sign-in cookie
(`sessions`), failed sign-ins slowed down (`throttle`), and the role check every action
makes (`guard`). Users, hashes and roles themselves are `dashboard.auth`."""
