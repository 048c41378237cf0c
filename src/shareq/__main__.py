from shareq.cli.main import main

main()
