/// The Mobile Sync dashboard page (placeholder until its issue step lands).
enum MobileSyncDashboardPage {
    static let html = "<!doctype html><title>Mobile Sync</title>"
}
