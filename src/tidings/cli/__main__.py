from tidings.cli.main import main

main()
